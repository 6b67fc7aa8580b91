/// The concrete modes a timer or descriptor source is in: none, one (the common case, no
/// allocation), or several in an array. One word: the cases share the references' spare bits, which
/// keeps a `LoopTimer` small (a pending timer's memory is part of the timer budget). Guarded by the
/// owning loop's lock.
enum ModeList: Sequence {
    case none
    case one(ModeState)
    case many([ModeState])

    init() { self = .none }

    var isEmpty: Bool {
        if case .none = self { return true }
        return false
    }

    func contains(_ mode: ModeState) -> Bool {
        switch self {
        case .none: false
        case .one(let only): only === mode
        case .many(let modes): modes.contains { $0 === mode }
        }
    }

    mutating func append(_ mode: ModeState) {
        switch self {
        case .none: self = .one(mode)
        case .one(let only): self = .many([only, mode])
        case .many(var modes):
            self = .none  // drop the second reference to the array so the append does not copy it
            modes.append(mode)
            self = .many(modes)
        }
    }

    mutating func remove(_ mode: ModeState) {
        switch self {
        case .none: return
        case .one(let only): if only === mode { self = .none }
        case .many(var modes):
            self = .none
            modes.removeAll { $0 === mode }
            self = modes.count == 1 ? .one(modes[0]) : modes.isEmpty ? .none : .many(modes)
        }
    }

    mutating func removeAll() {
        self = .none
    }

    struct Iterator: IteratorProtocol {
        fileprivate var only: ModeState?
        fileprivate var others: IndexingIterator<[ModeState]>

        mutating func next() -> ModeState? {
            if let mode = only {
                only = nil
                return mode
            }
            return others.next()
        }
    }

    func makeIterator() -> Iterator {
        switch self {
        case .none: Iterator(only: nil, others: [].makeIterator())
        case .one(let only): Iterator(only: only, others: [].makeIterator())
        case .many(let modes): Iterator(only: nil, others: modes.makeIterator())
        }
    }
}
