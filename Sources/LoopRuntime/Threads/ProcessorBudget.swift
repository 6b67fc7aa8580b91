import CLoopRuntimeShims

#if canImport(Glibc)
    import Glibc
#endif

/// How many processors this process can keep busy: the online processors, narrowed by the
/// thread's affinity mask (`taskset`, a container's cpuset) and by a CPU quota of its control
/// group (cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), on this cgroup or any
/// ancestor. A quota of 1.5 processors counts as 2: a thread per started processor, so a quota
/// that allows a little more than a whole processor does not leave work waiting behind one thread.
enum ProcessorBudget {
    /// The figure for this process, read from the system each time it is asked.
    static func current() -> Int {
        var count = online()
        let affinity = Int(cloop_affinity_processor_count())
        if affinity > 0 { count = min(count, affinity) }
        if let membership = readSmallFile("/proc/self/cgroup"),
            let quota = quotaProcessors(cgroupRoot: "/sys/fs/cgroup", membership: membership)
        {
            count = min(count, quota)
        }
        return max(1, count)
    }

    /// The online processors, at least 1.
    static func online() -> Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The smallest CPU quota, in whole processors rounded up, on the path from the process's
    /// cgroup to the root of its hierarchy, under `cgroupRoot` (where the cgroup file systems are
    /// mounted); `membership` is the text of `/proc/self/cgroup`. Nil when no quota applies (or
    /// nothing can be read: a system without cgroups is not limited by them).
    static func quotaProcessors(cgroupRoot: String, membership: String) -> Int? {
        var smallest: Double?
        func note(_ limit: Double?) {
            guard let limit else { return }
            smallest = min(smallest ?? limit, limit)
        }
        for line in membership.split(separator: "\n") {
            // "hierarchy-id:controllers:path"; the path may itself hold colons.
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            guard fields.count == 3 else { continue }
            let controllers = fields[1].split(separator: ",")
            let path = String(fields[2])
            if fields[0] == "0" && controllers.isEmpty {
                // cgroup v2: one unified hierarchy at the root.
                for directory in ancestry(of: path, under: cgroupRoot) {
                    note(readSmallFile(directory + "/cpu.max").flatMap(parseCPUMax))
                }
            } else if controllers.contains("cpu") {
                // cgroup v1: the cpu controller's hierarchy, mounted as "cpu" or "cpu,cpuacct".
                for mount in ["cpu", "cpu,cpuacct", "cpuacct,cpu"] {
                    for directory in ancestry(of: path, under: cgroupRoot + "/" + mount) {
                        guard let quota = readSmallFile(directory + "/cpu.cfs_quota_us"),
                            let period = readSmallFile(directory + "/cpu.cfs_period_us")
                        else { continue }
                        note(parseCFSQuota(quota: quota, period: period))
                    }
                }
            }
        }
        return smallest.map { max(1, Int($0.rounded(.up))) }
    }

    /// Processors allowed by a cgroup v2 `cpu.max` ("<quota> <period>", or "max <period>" for no
    /// limit); nil when there is no limit or the text is not that.
    static func parseCPUMax(_ text: some StringProtocol) -> Double? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let quota = Double(fields[0]), let period = Double(fields[1]), quota > 0,
            period > 0
        else { return nil }
        return quota / period
    }

    /// Processors allowed by cgroup v1's `cpu.cfs_quota_us` and `cpu.cfs_period_us` (a quota of
    /// -1 is no limit); nil when there is no limit or the texts are not numbers.
    static func parseCFSQuota(quota: some StringProtocol, period: some StringProtocol) -> Double? {
        func number(_ text: some StringProtocol) -> Double? {
            Double(text.split(whereSeparator: { $0 == " " || $0 == "\n" }).first ?? "")
        }
        guard let quota = number(quota), let period = number(period), quota > 0, period > 0 else { return nil }
        return quota / period
    }

    /// `root + path` and each of its parents up to `root` itself, deepest first.
    static func ancestry(of path: String, under root: String) -> [String] {
        var components = path.split(separator: "/").map(String.init)
        var directories: [String] = []
        while true {
            directories.append(([root] + components).joined(separator: "/"))
            if components.isEmpty { break }
            components.removeLast()
        }
        return directories
    }

    /// The contents of a small text file (a few kilobytes at most), or nil if it cannot be read.
    static func readSmallFile(_ path: String) -> String? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            bytes.append(contentsOf: chunk[0..<count])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
