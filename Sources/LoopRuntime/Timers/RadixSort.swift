/// A least-significant-digit radix sort of a buffer by an unsigned key, for the timer batches of a
/// busy loop: a million due timers sort in three linear passes instead of twenty comparison
/// levels, and their objects are released in address order (see `Loop.fireDueTimers`).
///
/// Stable: elements with equal keys keep their order. Only the bits in which the keys differ are
/// sorted (the key minus the smallest key, 11 bits a pass), so a batch whose keys span 50 ms of
/// nanoseconds or 100 MB of addresses takes three passes. Uses one scratch buffer of the same size.
/// Plain data only (`BitwiseCopyable`): elements are copied bit for bit between the buffers.
enum RadixSort {
    private static let digitBits = 11
    private static let bucketCount = 1 << digitBits

    /// Sorts `buffer` in place by `key`.
    @inline(__always)
    static func sort<Element: BitwiseCopyable>(
        _ buffer: UnsafeMutableBufferPointer<Element>, by key: (Element) -> UInt64
    ) {
        guard buffer.count > 1 else { return }
        var low = UInt64.max
        var high = UInt64.min
        for element in buffer {
            let value = key(element)
            low = min(low, value)
            high = max(high, value)
        }
        let span = high - low
        guard span > 0 else { return }
        let passes = (UInt64.bitWidth - span.leadingZeroBitCount + digitBits - 1) / digitBits

        let scratch = UnsafeMutableBufferPointer<Element>.allocate(capacity: buffer.count)
        defer { scratch.deallocate() }
        let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: bucketCount)
        defer { counts.deallocate() }

        var source = buffer
        var target = scratch
        for pass in 0..<passes {
            let shift = UInt64(pass * digitBits)
            let mask = UInt64(bucketCount - 1)
            counts.update(repeating: 0)
            for element in source { counts[Int(((key(element) - low) >> shift) & mask)] += 1 }
            var offset = 0
            for bucket in 0..<bucketCount {
                let count = counts[bucket]
                counts[bucket] = offset
                offset += count
            }
            for element in source {
                let bucket = Int(((key(element) - low) >> shift) & mask)
                target[counts[bucket]] = element
                counts[bucket] += 1
            }
            swap(&source, &target)
        }
        // After an odd number of passes the sorted elements are in the scratch buffer.
        if source.baseAddress != buffer.baseAddress {
            _ = buffer.update(fromContentsOf: source)
        }
    }
}
