import CoreFoundation
import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// What a program did, as both engines report it: callouts in order, observer activities, run
/// results.
final class Trace {
    var events: [String] = []

    func append(_ event: String) { events.append(event) }

    static func activityName(_ bit: UInt32) -> String {
        switch bit {
        case 1: "E"
        case 2: "BT"
        case 4: "BS"
        case 32: "BW"
        case 64: "AW"
        case 128: "X"
        default: "?\(bit)"
        }
    }

    static func activityNames(_ mask: UInt32) -> String {
        [1, 2, 4, 32, 64, 128].filter { mask & $0 != 0 }.map(activityName).joined(separator: "|")
    }
}

/// One engine running one program, on the thread that created it.
class World {
    let program: Program
    let trace = Trace()
    /// Nested runs in progress (0 outside any run).
    private(set) var runDepth = 0
    /// Bounds the work a program can make (a source that signals itself in every nested run).
    private var calloutBudget = 400

    init(program: Program) { self.program = program }

    // The engine's operations.
    func add(source: Int, to mode: ModeName) { fatalError("abstract") }
    func remove(source: Int, from mode: ModeName) { fatalError("abstract") }
    func add(observer: Int, to mode: ModeName) { fatalError("abstract") }
    func add(timer: Int, to mode: ModeName) { fatalError("abstract") }
    func addCommonMode(_ mode: ModeName) { fatalError("abstract") }
    func signal(_ source: Int) { fatalError("abstract") }
    func stop() { fatalError("abstract") }
    func invalidate(source: Int) { fatalError("abstract") }
    func invalidate(observer: Int) { fatalError("abstract") }
    func invalidate(timer: Int) { fatalError("abstract") }
    /// `seconds` from the program's start.
    func setFireDate(timer: Int, seconds: Double) { fatalError("abstract") }
    /// Each item's validity and the modes that contain it, for the end of the trace.
    func itemStates() -> [String] { fatalError("abstract") }
    func perform(block: Int, in mode: ModeName) { fatalError("abstract") }
    /// A zero-timeout run; returns the result's name.
    func runOnce(_ mode: ModeName, returnAfterSourceHandled: Bool) -> String { fatalError("abstract") }

    func execute() {
        for step in program.steps { execute(step) }
        for state in itemStates() { trace.append(state) }
    }

    /// The modes CF has created so far: those an item was added to, directly or as a common item
    /// (see `Deviations.modeIsMissingInCF`).
    private(set) var createdModes: Set<ModeName> = [.default]
    private var commonModes: Set<ModeName> = [.default]

    /// True if a valid item is recorded as a common item now (one-shot timers that fired and
    /// invalidated items are not).
    func commonItemsExist() -> Bool { false }
    func isValid(source: Int) -> Bool { true }
    func isValid(observer: Int) -> Bool { true }
    func isValid(timer: Int) -> Bool { true }

    private func noteItemAdded(to mode: ModeName) {
        if mode == .common {
            createdModes.formUnion(commonModes)
        } else {
            createdModes.insert(mode)
        }
    }

    private func execute(_ step: Step) {
        switch step {
        case .addSource(let source, let mode):
            if isValid(source: source) { noteItemAdded(to: mode) }  // CF ignores an invalid item
            add(source: source, to: mode)
        case .removeSource(let source, let mode): remove(source: source, from: mode)
        case .addObserver(let observer, let mode):
            if isValid(observer: observer) { noteItemAdded(to: mode) }
            add(observer: observer, to: mode)
        case .addTimer(let timer, let mode):
            if isValid(timer: timer) { noteItemAdded(to: mode) }
            add(timer: timer, to: mode)
        case .addCommonMode(let mode):
            commonModes.insert(mode)
            if commonItemsExist() { createdModes.insert(mode) }
            addCommonMode(mode)
        case .action(let action): execute(action)
        case .run(let mode, let rash): run(mode, returnAfterSourceHandled: rash)
        }
    }

    private func execute(_ action: Action) {
        switch action {
        case .signal(let source): signal(source)
        case .stop: stop()
        case .invalidateSource(let source): invalidate(source: source)
        case .invalidateObserver(let observer): invalidate(observer: observer)
        case .invalidateTimer(let timer): invalidate(timer: timer)
        case .setFireDate(let timer, let past):
            // Past dates 20 s back, each timer 10 ms apart (no ties, see TimerSpec.offsetSeconds).
            setFireDate(timer: timer, seconds: (past ? -20 : 3_600) - Double(timer) * 0.01)
        case .performBlock(let block, let mode):
            if mode != .common { createdModes.insert(mode) }  // CF creates a block's named mode
            perform(block: block, in: mode)
        case .nestedRun(let mode, let rash):
            guard runDepth < 3 else { return }
            run(mode, returnAfterSourceHandled: rash)
        }
    }

    private func run(_ mode: ModeName, returnAfterSourceHandled: Bool) {
        runDepth += 1
        let result = runOnce(mode, returnAfterSourceHandled: returnAfterSourceHandled)
        runDepth -= 1
        trace.append("run\(runDepth) \(mode) -> \(result)")
        if runDepth == 0 { afterTopLevelRun() }
    }

    /// Called after each top-level run (see `Deviations.stopLeavesAWakeUp`).
    func afterTopLevelRun() {}

    /// A callout of an item: recorded, then its actions.
    func callout(_ name: String, _ actions: [Action]) {
        trace.append(name)
        guard calloutBudget > 0 else { return }
        calloutBudget -= 1
        for action in actions { execute(action) }
    }
}

// MARK: - CFRunLoop

/// The reference: the CFRunLoop that ships with the toolchain.
final class CFWorld: World {
    let runLoop: CFRunLoop = CFRunLoopGetCurrent()
    private let start = CFAbsoluteTimeGetCurrent()
    private var sources: [CFRunLoopSource] = []
    private var observers: [CFRunLoopObserver] = []
    private var timers: [CFRunLoopTimer] = []
    private var modes: [ModeName: CFString] = [:]
    private var boxes: [SourceBox] = []

    final class SourceBox {
        unowned let world: CFWorld
        let index: Int
        init(world: CFWorld, index: Int) {
            self.world = world
            self.index = index
        }
    }

    override init(program: Program) {
        super.init(program: program)
        modes[.default] = unsafeBitCast(kCFRunLoopDefaultMode, to: CFString.self)
        modes[.common] = unsafeBitCast(kCFRunLoopCommonModes, to: CFString.self)
        modes[.m1] = CFStringCreateWithCString(nil, "m1", CFStringBuiltInEncodings.UTF8.rawValue)
        modes[.m2] = CFStringCreateWithCString(nil, "m2", CFStringBuiltInEncodings.UTF8.rawValue)
        for (index, spec) in program.sources.enumerated() {
            let box = SourceBox(world: self, index: index)
            boxes.append(box)
            var context = CFRunLoopSourceContext()
            context.info = Unmanaged.passUnretained(box).toOpaque()
            context.perform = { info in
                let box = Unmanaged<SourceBox>.fromOpaque(info!).takeUnretainedValue()
                box.world.callout("S\(box.index)", box.world.program.sources[box.index].actions)
            }
            sources.append(CFRunLoopSourceCreate(nil, CFIndex(spec.order), &context))
        }
        for (index, spec) in program.observers.enumerated() {
            let observer = CFRunLoopObserverCreateWithHandler(
                nil, CFOptionFlags(spec.activities), spec.repeats, CFIndex(spec.order)
            ) { [unowned self] _, activity in
                callout("O\(index):\(Trace.activityName(UInt32(activity.rawValue)))", spec.actions)
            }!
            observers.append(observer)
        }
        let now = start
        for (index, spec) in program.timers.enumerated() {
            let timer = CFRunLoopTimerCreateWithHandler(
                nil, now + TimerSpec.offsetSeconds(spec, index), spec.repeats ? 3_600 : 0, 0, 0
            ) { [unowned self] _ in
                callout("T\(index)", spec.actions)
            }!
            timers.append(timer)
        }
    }

    private func mode(_ name: ModeName) -> CFRunLoopMode { modes[name]! }

    override func add(source: Int, to mode: ModeName) { CFRunLoopAddSource(runLoop, sources[source], self.mode(mode)) }
    override func remove(source: Int, from mode: ModeName) {
        CFRunLoopRemoveSource(runLoop, sources[source], self.mode(mode))
    }
    override func add(observer: Int, to mode: ModeName) {
        CFRunLoopAddObserver(runLoop, observers[observer], self.mode(mode))
    }
    override func add(timer: Int, to mode: ModeName) { CFRunLoopAddTimer(runLoop, timers[timer], self.mode(mode)) }
    override func addCommonMode(_ mode: ModeName) { CFRunLoopAddCommonMode(runLoop, self.mode(mode)) }
    override func signal(_ source: Int) { CFRunLoopSourceSignal(sources[source]) }
    override func stop() {
        CFRunLoopStop(runLoop)
        stopped = true
    }

    private var stopped = false
    private lazy var flushMode: CFRunLoopMode = {
        let mode = CFStringCreateWithCString(nil, "flush", CFStringBuiltInEncodings.UTF8.rawValue)!
        var context = CFRunLoopSourceContext()
        context.perform = { _ in }
        CFRunLoopAddSource(runLoop, CFRunLoopSourceCreate(nil, 0, &context), mode)
        return mode
    }()

    override func afterTopLevelRun() {
        guard stopped, Deviations.stopLeavesAWakeUp else { return }
        stopped = false
        _ = CFRunLoopRunInMode(flushMode, 0, false)  // its wait takes the stale wake-up
    }
    override func invalidate(source: Int) { CFRunLoopSourceInvalidate(sources[source]) }
    override func invalidate(observer: Int) { CFRunLoopObserverInvalidate(observers[observer]) }
    override func invalidate(timer: Int) { CFRunLoopTimerInvalidate(timers[timer]) }
    override func setFireDate(timer: Int, seconds: Double) {
        CFRunLoopTimerSetNextFireDate(timers[timer], start + seconds)
    }
    override func itemStates() -> [String] {
        func modes(_ contains: (CFRunLoopMode) -> Bool) -> String {
            ModeName.allCases.filter { contains(mode($0)) }.map(\.rawValue).joined(separator: ",")
        }
        var states: [String] = []
        for (index, source) in sources.enumerated() {
            let valid = CFRunLoopSourceIsValid(source)
            states.append(
                "S\(index) \(valid ? "valid" : "invalid") in [\(modes { CFRunLoopContainsSource(runLoop, source, $0) })]"
            )
        }
        for (index, observer) in observers.enumerated() {
            let valid = CFRunLoopObserverIsValid(observer)
            states.append(
                "O\(index) \(valid ? "valid" : "invalid") in [\(modes { CFRunLoopContainsObserver(runLoop, observer, $0) })]"
            )
        }
        for (index, timer) in timers.enumerated() {
            let valid = CFRunLoopTimerIsValid(timer)
            states.append(
                "T\(index) \(valid ? "valid" : "invalid") in [\(modes { CFRunLoopContainsTimer(runLoop, timer, $0) })]")
        }
        return states
    }
    override func perform(block: Int, in mode: ModeName) {
        let actions = program.blocks[block].actions
        CFRunLoopPerformBlock(runLoop, modes[mode]!) { [unowned self] in callout("B\(block)", actions) }
    }
    override func runOnce(_ mode: ModeName, returnAfterSourceHandled: Bool) -> String {
        switch CFRunLoopRunInMode(self.mode(mode), 0, returnAfterSourceHandled) {
        case .finished: "finished"
        case .stopped: "stopped"
        case .timedOut: "timedOut"
        case .handledSource: "handledSource"
        default: "unknown"
        }
    }
}

// MARK: - LoopRuntime

final class LoopWorld: World {
    let loop = Loop.current
    private let start = ContinuousClock.now
    private var sources: [LoopSource] = []
    private var observers: [LoopObserver] = []
    private var timers: [LoopTimer] = []

    /// `breakObserverOrder` creates the observers with their orders reversed: a deliberately
    /// broken rule (SPEC R25), which the harness must catch.
    init(program: Program, breakObserverOrder: Bool = false) {
        super.init(program: program)
        // The items' handlers are @Sendable; the world is used on its one thread only.
        let world = UncheckedBox(self)
        for (index, spec) in program.sources.enumerated() {
            sources.append(
                LoopSource(order: spec.order) { world.value.callout("S\(index)", spec.actions) })
        }
        for (index, spec) in program.observers.enumerated() {
            observers.append(
                LoopObserver(
                    activities: Loop.Activity(rawValue: spec.activities), repeats: spec.repeats,
                    order: breakObserverOrder ? -spec.order : spec.order
                ) {
                    _, activity in
                    world.value.callout("O\(index):\(Trace.activityName(activity.rawValue))", spec.actions)
                })
        }
        let now = start
        for (index, spec) in program.timers.enumerated() {
            timers.append(
                LoopTimer(
                    fireAt: Deviations.fireDate(
                        now + .milliseconds(Int64(TimerSpec.offsetSeconds(spec, index) * 1_000)), createdAt: now,
                        creationIndex: index),
                    interval: spec.repeats ? .seconds(3_600) : nil
                ) {
                    _ in world.value.callout("T\(index)", spec.actions)
                })
        }
    }

    /// Breaks the world → item → handler → world cycle once the program ran (the thread's exit then
    /// tears the loop down and lets go of the rest): no leak under LeakSanitizer.
    func letGoOfItems() {
        sources = []
        observers = []
        timers = []
    }

    private func mode(_ name: ModeName) -> Loop.Mode {
        switch name {
        case .default: .default
        case .common: .common
        case .m1: "m1"
        case .m2: "m2"
        }
    }

    override func add(source: Int, to mode: ModeName) { loop.add(sources[source], forMode: self.mode(mode)) }
    override func remove(source: Int, from mode: ModeName) { loop.remove(sources[source], forMode: self.mode(mode)) }
    override func add(observer: Int, to mode: ModeName) { loop.add(observers[observer], forMode: self.mode(mode)) }
    override func add(timer: Int, to mode: ModeName) { loop.add(timers[timer], forMode: self.mode(mode)) }
    override func addCommonMode(_ mode: ModeName) { loop.addCommonMode(self.mode(mode)) }
    override func isValid(source: Int) -> Bool { sources[source].isValid }
    override func isValid(observer: Int) -> Bool { observers[observer].isValid }
    override func isValid(timer: Int) -> Bool { timers[timer].isValid }
    override func commonItemsExist() -> Bool {
        sources.contains { $0.isValid && loop.contains($0, forMode: .common) }
            || observers.contains { $0.isValid && loop.contains($0, forMode: .common) }
            || timers.contains { $0.isValid && loop.contains($0, forMode: .common) }
    }
    override func signal(_ source: Int) { sources[source].signal() }
    override func stop() { loop.stop() }
    override func invalidate(source: Int) { sources[source].invalidate() }
    override func invalidate(observer: Int) { observers[observer].invalidate() }
    override func invalidate(timer: Int) { timers[timer].invalidate() }
    override func setFireDate(timer: Int, seconds: Double) {
        let date = start + .milliseconds(Int64(seconds * 1_000))
        // CF takes a past date as "now" when it is set (see Deviations.fireDate).
        timers[timer].setFireDate(Deviations.fireDate(date, createdAt: .now, creationIndex: 0))
    }
    override func itemStates() -> [String] {
        func modes(_ contains: (Loop.Mode) -> Bool) -> String {
            ModeName.allCases.filter { contains(mode($0)) }.map(\.rawValue).joined(separator: ",")
        }
        var states: [String] = []
        for (index, source) in sources.enumerated() {
            states.append(
                "S\(index) \(source.isValid ? "valid" : "invalid") in [\(modes { loop.contains(source, forMode: $0) })]"
            )
        }
        for (index, observer) in observers.enumerated() {
            states.append(
                "O\(index) \(observer.isValid ? "valid" : "invalid") in [\(modes { loop.contains(observer, forMode: $0) })]"
            )
        }
        for (index, timer) in timers.enumerated() {
            states.append(
                "T\(index) \(timer.isValid ? "valid" : "invalid") in [\(modes { loop.contains(timer, forMode: $0) })]")
        }
        return states
    }
    override func perform(block: Int, in mode: ModeName) {
        let actions = program.blocks[block].actions
        let world = UncheckedBox(self)
        loop.perform(inModes: [self.mode(mode)]) { world.value.callout("B\(block)", actions) }
    }
    override func runOnce(_ mode: ModeName, returnAfterSourceHandled: Bool) -> String {
        if Deviations.modeIsMissingInCF(mode, created: createdModes) { return "finished" }
        return switch loop.run(self.mode(mode), for: .zero, returnAfterSourceHandled: returnAfterSourceHandled) {
        case .finished: "finished"
        case .stopped: "stopped"
        case .timedOut: "timedOut"
        case .handledSource: "handledSource"
        }
    }
}

/// Carries a thread-confined object into a `@Sendable` closure that runs on the same thread.
struct UncheckedBox<Value: AnyObject>: @unchecked Sendable {
    // Confinement: every closure holding one runs on the thread that made the world.
    let value: Value
    init(_ value: Value) { self.value = value }
}

// MARK: - Running

/// Runs `body` on a fresh thread (its own run loop) and waits for it.
private final class ThreadBody {
    var body: (() -> Void)?
}

func onFreshThread<Result>(_ body: @escaping () -> Result) -> Result {
    var result: Result?
    let slot = ThreadBody()
    slot.body = { result = body() }
    var thread = pthread_t()
    let created = pthread_create(
        &thread, nil,
        { argument in
            let slot = Unmanaged<AnyObject>.fromOpaque(argument!).takeRetainedValue() as! ThreadBody
            slot.body?()
            return nil
        }, Unmanaged.passRetained(slot as AnyObject).toOpaque())
    precondition(created == 0, "pthread_create failed: \(created)")
    pthread_join(thread, nil)
    return result!
}

enum Engines {
    static func cf(_ program: Program) -> [String] {
        onFreshThread {
            let world = CFWorld(program: program)
            world.execute()
            return world.trace.events
        }
    }

    static func loopRuntime(_ program: Program, breakObserverOrder: Bool = false) -> [String] {
        onFreshThread {
            let world = LoopWorld(program: program, breakObserverOrder: breakObserverOrder)
            world.execute()
            defer { world.letGoOfItems() }
            return world.trace.events
        }
    }
}
