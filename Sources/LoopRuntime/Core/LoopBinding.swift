/// An item's tie to the one loop it may belong to: timers, observers and descriptor sources are
/// bound to the first loop they are added to (SPEC R26, R33, M6). Each item keeps one, guarded by
/// its stripe lock.
///
/// One word: besides the anchor, it can hold a timer's label (a timer has no spare word for one:
/// its 88 bytes are part of the timer budget), in a small box that only labelled timers pay for.
struct LoopBinding {
    private enum Storage {
        case unbound
        case bound(LoopAnchor)
        case labelled(LabelledBinding)
    }

    private var storage: Storage

    init() { storage = .unbound }

    /// A binding carrying `label` (a labelled timer's).
    init(label: StaticString) { storage = .labelled(LabelledBinding(label: label)) }

    /// The anchor of the loop the item is bound to, for good once set (M6).
    var anchor: LoopAnchor? {
        switch storage {
        case .unbound: nil
        case .bound(let anchor): anchor
        case .labelled(let box): box.anchor
        }
    }

    /// The label given at creation, if any.
    var label: StaticString? {
        if case .labelled(let box) = storage { return box.label }
        return nil
    }

    var isBound: Bool { anchor != nil }

    /// The loop the item is bound to, while that loop exists.
    var loop: Loop? { anchor?.loop }

    mutating func bind(to loop: Loop) {
        switch storage {
        case .unbound, .bound: storage = .bound(loop.anchor)
        case .labelled(let box): box.anchor = loop.anchor
        }
    }
}

/// A labelled item's binding: its label and, once bound, its loop's anchor. `@unchecked Sendable`:
/// `anchor` is written and read only under the owning item's stripe lock, like the binding itself.
final class LabelledBinding: @unchecked Sendable {
    let label: StaticString
    var anchor: LoopAnchor?

    init(label: StaticString) { self.label = label }
}

/// What the items bound to a loop hold on to: the loop's anchor holds the loop weakly, and the
/// items hold the anchor strongly. One weak reference per loop instead of one per item: forming a
/// weak reference costs the Swift runtime several compare-and-swaps, a strong one a single atomic
/// add (the measurement is in BENCHMARKS.md, "Why the code is as it is"). The anchor's
/// identity also answers "is this item bound to that loop" without loading the weak reference.
///
/// `@unchecked Sendable`: `loop` is written once, in the loop's `init`, before the loop (and so
/// the anchor) can reach another thread; it is only read after that.
final class LoopAnchor: @unchecked Sendable {
    weak var loop: Loop?
}

/// An item that belongs to at most one loop.
protocol LoopBoundItem: AnyObject {
    /// The item's type name and its one-loop rule, for the message when it is added elsewhere.
    static var itemName: String { get }
    static var bindingRule: String { get }

    /// Runs `body` with the item's binding and whether the item is still valid, both read under
    /// the item's stripe lock.
    func withBinding<R>(_ body: (inout LoopBinding, _ isValid: Bool) -> R) -> R

    /// Called under the item's stripe lock when the item is bound to `loop`, its first add.
    func didBind(to loop: Loop)
}

extension LoopBoundItem {
    func didBind(to loop: Loop) {}
}

/// What binding an item found.
enum BindOutcome {
    case bound, invalid
    case foreign(owner: String)
}

extension Loop {
    /// Binds `item` to this loop on its first add. Returns false for an invalid item (adding it
    /// is a no-op); traps if the item belongs to another loop (SPEC M6). Lock held.
    func bind<Item: LoopBoundItem>(_ item: Item) -> Bool {
        let outcome: BindOutcome = item.withBinding { binding, isValid in
            guard isValid else { return .invalid }
            if !binding.isBound {
                binding.bind(to: self)
                item.didBind(to: self)
                return .bound
            }
            if binding.anchor === anchor { return .bound }
            return .foreign(owner: binding.loop?.description ?? "a loop that no longer exists")
        }
        switch outcome {
        case .bound:
            return true
        case .invalid:
            return false
        case .foreign(let owner):
            let name = Item.itemName
            preconditionFailure(
                "Loop.add(_:forMode:): this \(name) already belongs to the \(owner); it cannot be added to the \(self). A \(name) belongs to one loop (SPEC \(Item.bindingRule), M6): create another one for this loop."
            )
        }
    }

    /// True if `item` is bound to this loop.
    func isBound(_ item: some LoopBoundItem) -> Bool {
        item.withBinding { binding, _ in binding.anchor === anchor }
    }
}
