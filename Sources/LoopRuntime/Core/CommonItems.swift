/// The items added to ``Loop/Mode/common`` (SPEC R63), of every kind, in one table: a mode added
/// to the common set later gets each of them (SPEC R62), observers in the order they were added
/// (SPEC R25). Guarded by the owning loop's lock.
struct CommonItems {
    /// A common item.
    enum Item {
        case timer(LoopTimer)
        case source(LoopSource)
        case descriptorSource(LoopDescriptorSource)
        case observer(LoopObserver)

        var object: AnyObject {
            switch self {
            case .timer(let timer): timer
            case .source(let source): source
            case .descriptorSource(let source): source
            case .observer(let observer): observer
            }
        }
    }

    private var items: [ObjectIdentifier: (order: UInt64, item: Item)] = [:]
    private var nextOrder: UInt64 = 0
    /// The number of common timers (``Loop/timerCount(forMode:)`` for `.common`).
    private(set) var timerCount = 0

    /// Records `item`; false if it already was a common item.
    mutating func insert(_ item: Item) -> Bool {
        let id = ObjectIdentifier(item.object)
        guard items[id] == nil else { return false }
        nextOrder += 1
        items[id] = (nextOrder, item)
        if case .timer = item { timerCount += 1 }
        return true
    }

    /// Forgets `object`; false if it was not a common item.
    @discardableResult
    mutating func remove(_ object: AnyObject) -> Bool {
        // Every one-shot timer that fires comes here; most loops have no common items at all.
        guard !items.isEmpty, let removed = items.removeValue(forKey: ObjectIdentifier(object)) else { return false }
        if case .timer = removed.item { timerCount -= 1 }
        return true
    }

    func contains(_ object: AnyObject) -> Bool {
        items[ObjectIdentifier(object)] != nil
    }

    /// Every item, in the order they were added.
    var inOrder: [Item] {
        items.values.sorted { $0.order < $1.order }.map(\.item)
    }

    /// Forgets every item and returns them (to be released after unlocking).
    mutating func removeAll() -> [AnyObject] {
        defer {
            items.removeAll()
            timerCount = 0
        }
        return items.values.map { $0.item.object }
    }
}
