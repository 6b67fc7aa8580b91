// Random programs of loop operations, run against CFRunLoop and LoopRuntime (issue #18).
//
// A program is data: the items it uses (signalled sources, observers, timers, blocks), each with
// the actions its callout takes, and the top-level steps made on the loop's thread. Only
// operations whose outcome does not depend on wall-clock timing are generated: every run has a
// zero timeout, timers are already due (a date in the past) or far in the future, repeating timers
// repeat once an hour.

/// The modes a program uses. `common` is the common-modes pseudo-mode (add targets only).
enum ModeName: String, CaseIterable, CustomStringConvertible {
    case `default`, m1, m2, common
    var description: String { rawValue }
    static let runnable: [ModeName] = [.default, .m1, .m2]
}

/// What a callout does.
enum Action: Equatable, CustomStringConvertible {
    case signal(Int)
    case stop
    case invalidateSource(Int)
    case invalidateObserver(Int)
    case invalidateTimer(Int)
    /// Moves a timer: to a date already past (due again at once, SPEC R32/R38) or an hour away.
    case setFireDate(Int, past: Bool)
    case performBlock(Int, ModeName)
    /// A nested run (zero timeout), in the same or another mode.
    case nestedRun(ModeName, returnAfterSourceHandled: Bool)

    var description: String {
        switch self {
        case .signal(let source): "signal S\(source)"
        case .stop: "stop"
        case .invalidateSource(let source): "invalidate S\(source)"
        case .invalidateObserver(let observer): "invalidate O\(observer)"
        case .invalidateTimer(let timer): "invalidate T\(timer)"
        case .setFireDate(let timer, let past): "set T\(timer)'s fire date \(past ? "in the past" : "an hour away")"
        case .performBlock(let block, let mode): "perform B\(block) in \(mode)"
        case .nestedRun(let mode, let rash): "run \(mode)\(rash ? " returnAfterSourceHandled" : "")"
        }
    }
}

struct SourceSpec: CustomStringConvertible {
    var order: Int
    var actions: [Action]
    var description: String { "order \(order), does [\(actions.map(\.description).joined(separator: "; "))]" }
}

struct ObserverSpec: CustomStringConvertible {
    /// CF's activity bits: entry 1, beforeTimers 2, beforeSources 4, beforeWaiting 32,
    /// afterWaiting 64, exit 128.
    var activities: UInt32
    var order: Int
    var repeats: Bool
    var actions: [Action]
    var description: String {
        "activities \(Trace.activityNames(activities)), order \(order)\(repeats ? "" : ", one-shot"), does [\(actions.map(\.description).joined(separator: "; "))]"
    }
}

struct TimerSpec: CustomStringConvertible {
    /// Due already (a date in the past), or an hour away.
    var past: Bool
    var repeats: Bool
    var actions: [Action]
    var description: String {
        "\(past ? "due" : "far future")\(repeats ? ", repeating hourly" : ""), does [\(actions.map(\.description).joined(separator: "; "))]"
    }
}

extension TimerSpec {
    /// The timer's fire date, in seconds from the program's start: due ones 10 s in the past, an
    /// hour away otherwise, each timer 10 ms from the next, so that no two dates are equal (CF
    /// converts a date to its internal clock when the timer is created: two timers given the same
    /// date at different moments never tie there; see also `Deviations.fireDate`).
    static func offsetSeconds(_ spec: TimerSpec, _ index: Int) -> Double {
        (spec.past ? -10 : 3_600) - Double(index) * 0.01
    }
}

struct BlockSpec: CustomStringConvertible {
    var actions: [Action]
    var description: String { "does [\(actions.map(\.description).joined(separator: "; "))]" }
}

/// A top-level step, made on the loop's thread outside any run.
enum Step: Equatable, CustomStringConvertible {
    case addSource(Int, ModeName)
    case removeSource(Int, ModeName)
    case addObserver(Int, ModeName)
    case addTimer(Int, ModeName)
    case addCommonMode(ModeName)
    case action(Action)
    case run(ModeName, returnAfterSourceHandled: Bool)

    var description: String {
        switch self {
        case .addSource(let source, let mode): "add S\(source) to \(mode)"
        case .removeSource(let source, let mode): "remove S\(source) from \(mode)"
        case .addObserver(let observer, let mode): "add O\(observer) to \(mode)"
        case .addTimer(let timer, let mode): "add T\(timer) to \(mode)"
        case .addCommonMode(let mode): "add \(mode) to the common modes"
        case .action(let action): action.description
        case .run(let mode, let rash): "run \(mode) for 0\(rash ? " returnAfterSourceHandled" : "")"
        }
    }
}

struct Program: CustomStringConvertible {
    var sources: [SourceSpec] = []
    var observers: [ObserverSpec] = []
    var timers: [TimerSpec] = []
    var blocks: [BlockSpec] = []
    var steps: [Step] = []

    var description: String {
        var lines: [String] = []
        for (index, source) in sources.enumerated() { lines.append("  S\(index): \(source)") }
        for (index, observer) in observers.enumerated() { lines.append("  O\(index): \(observer)") }
        for (index, timer) in timers.enumerated() { lines.append("  T\(index): \(timer)") }
        for (index, block) in blocks.enumerated() { lines.append("  B\(index): \(block)") }
        for (index, step) in steps.enumerated() { lines.append("  \(index + 1). \(step)") }
        return lines.joined(separator: "\n")
    }
}

/// SplitMix64: small, fast, and the same sequence for a seed on every platform.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension Program {
    /// A random program for `seed`. Without `everything`, the shapes of three excused differences
    /// are left out: nested runs from a block callout (`Deviations.blocksStayVisible`), `stop()` in
    /// a program with timers (`Deviations.stopHidesDueTimers`), and a timer callout moving its own
    /// timer to the past (`Deviations.timerMovesItselfToThePast`). With it, a disagreement whose
    /// shrunk program still has one of these shapes is counted as excused (`Deviations.excuse`).
    static func random(seed: UInt64, everything: Bool = false) -> Program {
        var random = SeededGenerator(seed: seed)
        var program = Program()
        let sourceCount = Int.random(in: 1...4, using: &random)
        let observerCount = Int.random(in: 0...3, using: &random)
        let timerCount = Int.random(in: 0...3, using: &random)
        let blockCount = Int.random(in: 0...3, using: &random)
        let stops = everything || timerCount == 0
        func actions(nestedRuns: Bool = true) -> [Action] {
            (0..<Int.random(in: 0...2, using: &random)).map { _ in
                switch Int.random(in: 0..<11, using: &random) {
                case 0, 1, 2: .signal(Int.random(in: 0..<sourceCount, using: &random))
                case 3 where stops: .stop
                case 4: .invalidateSource(Int.random(in: 0..<sourceCount, using: &random))
                case 5 where observerCount > 0: .invalidateObserver(Int.random(in: 0..<observerCount, using: &random))
                case 6 where timerCount > 0: .invalidateTimer(Int.random(in: 0..<timerCount, using: &random))
                case 10 where timerCount > 0:
                    .setFireDate(Int.random(in: 0..<timerCount, using: &random), past: Bool.random(using: &random))
                case 7 where blockCount > 0:
                    .performBlock(
                        Int.random(in: 0..<blockCount, using: &random), ModeName.allCases.randomElement(using: &random)!
                    )
                case 8 where nestedRuns, 9 where nestedRuns:
                    .nestedRun(
                        ModeName.runnable.randomElement(using: &random)!,
                        returnAfterSourceHandled: Bool.random(using: &random))
                default: .signal(Int.random(in: 0..<sourceCount, using: &random))
                }
            }
        }
        let activityBits: [UInt32] = [1, 2, 4, 32, 64, 128]
        let blockNestedRuns = everything
        program.sources = (0..<sourceCount).map { _ in
            SourceSpec(order: Int.random(in: -1...1, using: &random), actions: actions())
        }
        program.observers = (0..<observerCount).map { _ in
            let mask = activityBits.filter { _ in Bool.random(using: &random) }.reduce(0, |)
            let activities: UInt32 = mask == 0 ? 2 : mask
            return ObserverSpec(
                activities: activities, order: Int.random(in: -1...1, using: &random),
                repeats: Int.random(in: 0..<4, using: &random) != 0,
                actions: actions())
        }
        program.timers = (0..<timerCount).map { _ in
            TimerSpec(
                past: Int.random(in: 0..<3, using: &random) != 0, repeats: Bool.random(using: &random),
                actions: actions())
        }
        program.blocks = (0..<blockCount).map { _ in BlockSpec(actions: actions(nestedRuns: blockNestedRuns)) }
        if !everything {
            // No timer callout moves its own timer to the past (Deviations.timerMovesItselfToThePast).
            for index in program.timers.indices {
                program.timers[index].actions.removeAll { $0 == .setFireDate(index, past: true) }
            }
        }
        let mode = { ModeName.allCases.randomElement(using: &random)! }
        for _ in 0..<Int.random(in: 3...14, using: &random) {
            let step: Step =
                switch Int.random(in: 0..<12, using: &random) {
                case 0, 1: .addSource(Int.random(in: 0..<sourceCount, using: &random), mode())
                case 2: .removeSource(Int.random(in: 0..<sourceCount, using: &random), mode())
                case 3 where observerCount > 0: .addObserver(Int.random(in: 0..<observerCount, using: &random), mode())
                case 4 where timerCount > 0: .addTimer(Int.random(in: 0..<timerCount, using: &random), mode())
                case 5: .addCommonMode(Bool.random(using: &random) ? .m1 : .m2)
                case 6, 7: .action(actions().first ?? .signal(Int.random(in: 0..<sourceCount, using: &random)))
                default:
                    .run(
                        ModeName.runnable.randomElement(using: &random)!,
                        returnAfterSourceHandled: Int.random(in: 0..<3, using: &random) == 0)
                }
            program.steps.append(step)
        }
        // End with runs in every mode, so that what is pending shows.
        for mode in ModeName.runnable { program.steps.append(.run(mode, returnAfterSourceHandled: false)) }
        if program.steps.contains(where: { if case .addCommonMode = $0 { true } else { false } }) {
            Deviations.breakObserverOrderTies(&program.observers)
        }
        return program
    }

    /// Smaller programs that may still disagree: each step removed, then each action removed.
    func shrinkCandidates() -> [Program] {
        var candidates: [Program] = []
        for index in steps.indices {
            var smaller = self
            smaller.steps.remove(at: index)
            candidates.append(smaller)
        }
        func dropping<T>(_ keyPath: WritableKeyPath<Program, [T]>, _ actions: WritableKeyPath<T, [Action]>) {
            for item in self[keyPath: keyPath].indices {
                for action in self[keyPath: keyPath][item][keyPath: actions].indices {
                    var smaller = self
                    smaller[keyPath: keyPath][item][keyPath: actions].remove(at: action)
                    candidates.append(smaller)
                }
            }
        }
        dropping(\.sources, \.actions)
        dropping(\.observers, \.actions)
        dropping(\.timers, \.actions)
        dropping(\.blocks, \.actions)
        return candidates
    }
}
