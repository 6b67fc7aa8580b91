/// The modes a queued block may run in (SPEC R57): `.common` (the usual case, stored without an
/// array), one mode, or several; and a labelled block's modes with its label, in an object of
/// their own (so that a label costs unlabelled blocks nothing).
enum BlockModes {
    case common
    case one(Loop.Mode)
    case several([Loop.Mode])
    case labelled(LabelledBlockModes)

    init(_ modes: [Loop.Mode]) {
        if modes.count == 1 {
            self = modes[0] == .common ? .common : .one(modes[0])
        } else {
            self = .several(modes)
        }
    }

    init(_ modes: [Loop.Mode], label: StaticString?) {
        self.init(modes)
        if let label { self = .labelled(LabelledBlockModes(self, label: label)) }
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
        case .labelled(let labelled):
            return labelled.modes.matches(mode)
        }
    }

    /// The block's label, if it has one.
    @inline(__always)
    var label: StaticString? {
        if case .labelled(let labelled) = self { return labelled.label }
        return nil
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
        case .labelled(let labelled): labelled.modes.representative
        }
    }
}

/// A labelled block's modes and label.
final class LabelledBlockModes: Sendable {
    let modes: BlockModes
    let label: StaticString

    init(_ modes: BlockModes, label: StaticString) {
        self.modes = modes
        self.label = label
    }
}

/// A block queued with ``Loop/perform(inModes:label:_:)`` and the modes it may run in (SPEC R57).
struct QueuedBlock {
    let modes: BlockModes
    let body: @Sendable () -> Void

    /// True if the block may run in `mode` (SPEC R58): see ``BlockModes/matches(_:)``.
    @inline(__always)
    func matches(_ mode: ModeState) -> Bool {
        modes.matches(mode)
    }
}
