import CLoopRuntimeShims

/// Calls a system call, retrying on `EINTR`, and turns a failure into a ``LoopSystemError``
/// naming the call. Every system call of the engine goes through here.
@inline(__always)
func retryingSyscall(_ name: StaticString, _ body: () -> Int32) throws(LoopSystemError) -> Int32 {
    while true {
        let result = body()
        if result >= 0 { return result }
        let error = cloop_errno()
        if error == EINTR { continue }
        throw LoopSystemError(call: "\(name)", errno: error)
    }
}

/// Calls a system call that can only fail through a bug in LoopRuntime (a bad descriptor or
/// argument of its own making), retrying on `EINTR`, and traps with the call and errno otherwise.
@inline(__always)
@discardableResult
func infallibleSyscall(_ name: StaticString, _ body: () -> Int32) -> Int32 {
    do {
        return try retryingSyscall(name, body)
    } catch {
        fatalError("LoopRuntime internal error: \(error). Please report this bug.")
    }
}
