/// The result of binding a timer or observer to a loop on its first add (SPEC R26, R33, M6).
enum BindOutcome {
    case bound
    case invalid
    case foreign(owner: String)

    /// Binds an unbound item to `loop`; reports the owner of an item bound elsewhere.
    static func bind(_ isBound: inout Bool, _ owner: inout Loop?, to loop: Loop) -> BindOutcome {
        if !isBound {
            isBound = true
            owner = loop
            return .bound
        }
        if owner === loop { return .bound }
        return .foreign(owner: owner?.description ?? "a loop that no longer exists")
    }

    /// True to go on adding; false for an invalid item (a no-op); traps for a foreign one.
    func proceed(item: String, rule: String, into loop: Loop) -> Bool {
        switch self {
        case .bound:
            return true
        case .invalid:
            return false
        case .foreign(let owner):
            preconditionFailure(
                "Loop.add(_:forMode:): this \(item) already belongs to the \(owner); it cannot be added to the \(loop). A \(item) belongs to one loop (SPEC \(rule), M6): create another one for this loop."
            )
        }
    }
}
