import Testing
@testable import LoopRuntime
