/// The concrete modes a timer or descriptor source is in: one inline (the common case, no
/// allocation), more in an array. Guarded by the owning loop's lock.
struct ModeList: Sequence {
    private var first: ModeState?
    private var others: [ModeState] = []

    var isEmpty: Bool { first == nil }

    func contains(_ mode: ModeState) -> Bool {
        first === mode || others.contains { $0 === mode }
    }

    mutating func append(_ mode: ModeState) {
        if first == nil { first = mode } else { others.append(mode) }
    }

    mutating func remove(_ mode: ModeState) {
        if first === mode {
            first = others.isEmpty ? nil : others.removeFirst()
        } else {
            others.removeAll { $0 === mode }
        }
    }

    mutating func removeAll() {
        first = nil
        others.removeAll()
    }

    struct Iterator: IteratorProtocol {
        fileprivate var first: ModeState?
        fileprivate var others: IndexingIterator<[ModeState]>

        mutating func next() -> ModeState? {
            if let mode = first {
                first = nil
                return mode
            }
            return others.next()
        }
    }

    func makeIterator() -> Iterator {
        Iterator(first: first, others: others.makeIterator())
    }
}
