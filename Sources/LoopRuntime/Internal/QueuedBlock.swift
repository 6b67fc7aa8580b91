/// The modes a queued block may run in (SPEC R57): `.common` (the usual case, stored without an
/// array), one mode, or several.
enum BlockModes {
    case common
    case one(Loop.Mode)
    case several([Loop.Mode])

    init(_ modes: [Loop.Mode]) {
        if modes.count == 1 {
            self = modes[0] == .common ? .common : .one(modes[0])
        } else {
            self = .several(modes)
        }
    }

    /// True if a block of these modes may run in `mode` (SPEC R58): it names the mode, or names
    /// `.common` and the mode is in the common set.
    @inline(__always)
    func matches(_ mode: ModeState) -> Bool {
        switch self {
        case .common:
            return mode.isCommon
        case .one(let target):
            return target == mode.mode
        case .several(let targets):
            for target in targets {
                if target == mode.mode || (mode.isCommon && target == .common) { return true }
            }
            return false
        }
    }

    /// True for `.common` alone, the usual case.
    @inline(__always)
    var isCommon: Bool {
        if case .common = self { return true }
        return false
    }

    /// The first concrete mode named, or `.default` for `.common` (for the shutdown drain).
    var representative: Loop.Mode {
        switch self {
        case .common: .default
        case .one(let mode): mode
        case .several(let modes): modes.first { $0 != .common } ?? .default
        }
    }
}

/// A block queued with ``Loop/perform(inModes:_:)`` and the modes it may run in (SPEC R57).
struct QueuedBlock {
    let modes: BlockModes
    let body: @Sendable () -> Void

    /// True if the block may run in `mode` (SPEC R58): see ``BlockModes/matches(_:)``.
    @inline(__always)
    func matches(_ mode: ModeState) -> Bool {
        modes.matches(mode)
    }
}
