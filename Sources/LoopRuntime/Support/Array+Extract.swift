extension Array {
    /// Moves the elements `route` sends `.take` to the end of `taken` and keeps the rest in place,
    /// in their order. O(n), no allocation beyond `taken`. (Nothing is dropped here: the caller
    /// releases what it took after unlocking.)
    mutating func extract(into taken: inout [Element], _ route: (Element) -> ExtractRoute) {
        var kept = 0
        for index in indices {
            switch route(self[index]) {
            case .take:
                taken.append(self[index])
            case .keep:
                if kept != index { self[kept] = self[index] }
                kept += 1
            }
        }
        removeLast(count - kept)
    }
}

/// Where `Array.extract(into:_:)` sends an element.
enum ExtractRoute {
    case take, keep
}
