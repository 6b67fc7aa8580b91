/// An item's tie to the one loop it may belong to: timers, observers and descriptor sources are
/// bound to the first loop they are added to (SPEC R26, R33, M6). Each item keeps one, guarded by
/// its stripe lock.
struct LoopBinding {
    weak var loop: Loop?
    var isBound = false
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
                binding.isBound = true
                binding.loop = self
                item.didBind(to: self)
                return .bound
            }
            if binding.loop === self { return .bound }
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
        item.withBinding { binding, _ in binding.loop === self }
    }
}
