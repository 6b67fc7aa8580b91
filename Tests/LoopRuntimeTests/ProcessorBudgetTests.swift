import CLoopRuntimeShims
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A group's default size follows the processors the process may use (issue #34): the affinity
/// mask and a cgroup CPU quota, read from a fake cgroup tree here.
@Suite("Processor budget (a group's default size)", .timeLimit(.minutes(3)))
struct ProcessorBudgetTests {
    @Test("cgroup v2 cpu.max: a quota over a period, \"max\" is no limit, anything else is ignored")
    func parsesCPUMax() {
        #expect(ProcessorBudget.parseCPUMax("150000 100000\n") == 1.5)
        #expect(ProcessorBudget.parseCPUMax("400000 100000") == 4)
        #expect(ProcessorBudget.parseCPUMax("max 100000\n") == nil)
        #expect(ProcessorBudget.parseCPUMax("0 100000") == nil)
        #expect(ProcessorBudget.parseCPUMax("") == nil)
        #expect(ProcessorBudget.parseCPUMax("150000") == nil)
    }

    @Test("cgroup v1 cfs quota and period: -1 is no limit")
    func parsesCFSQuota() {
        #expect(ProcessorBudget.parseCFSQuota(quota: "200000\n", period: "100000\n") == 2)
        #expect(ProcessorBudget.parseCFSQuota(quota: "-1\n", period: "100000\n") == nil)
        #expect(ProcessorBudget.parseCFSQuota(quota: "50000", period: "0") == nil)
        #expect(ProcessorBudget.parseCFSQuota(quota: "x", period: "100000") == nil)
    }

    @Test("v2: the smallest quota on the way to the root counts, rounded up to whole processors")
    func unifiedHierarchy() throws {
        let root = try FakeCgroupTree()
        root.write("cpu.max", "max 100000\n")
        root.write("kubepods/cpu.max", "300000 100000\n")
        root.write("kubepods/pod/cpu.max", "max 100000\n")
        root.write("kubepods/pod/app/cpu.max", "max 100000\n")
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "0::/kubepods/pod/app\n") == 3)
        root.write("kubepods/pod/app/cpu.max", "150000 100000\n")
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "0::/kubepods/pod/app\n") == 2)
        root.write("kubepods/pod/app/cpu.max", "20000 100000\n")
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "0::/kubepods/pod/app\n") == 1)
        // A cgroup namespace shows the container's own cgroup as "/".
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path + "/kubepods", membership: "0::/\n") == 3)
    }

    @Test("v1: the cpu controller's hierarchy, mounted as cpu,cpuacct; other controllers are ignored")
    func legacyHierarchy() throws {
        let root = try FakeCgroupTree()
        root.write("cpu,cpuacct/cpu.cfs_quota_us", "-1\n")
        root.write("cpu,cpuacct/cpu.cfs_period_us", "100000\n")
        root.write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n")
        root.write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
        root.write("memory/docker/abc/cpu.cfs_quota_us", "100000\n")  // not a cpu hierarchy
        root.write("memory/docker/abc/cpu.cfs_period_us", "100000\n")
        let membership = "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n"
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: membership) == 3)
    }

    @Test("No quota, no cgroup files, or an unreadable membership: no limit")
    func noLimit() throws {
        let root = try FakeCgroupTree()
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "0::/a\n") == nil)
        root.write("a/cpu.max", "max 100000\n")
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "0::/a\n") == nil)
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "") == nil)
        #expect(ProcessorBudget.quotaProcessors(cgroupRoot: root.path, membership: "garbage") == nil)
    }

    @Test("This process: at least 1, at most the online processors and the affinity mask (and a real quota in CI)")
    func thisProcess() {
        let affinity = Int(cloop_affinity_processor_count())
        #expect(affinity >= 1)
        #expect(affinity <= LoopThreadGroup.processorCount)
        let available = LoopThreadGroup.availableProcessorCount
        #expect(available >= 1)
        #expect(available <= affinity)
        // .ci/run runs this test once more inside a cgroup with a CPU quota, and says what to expect.
        if let expected = getenv("LOOP_EXPECTED_AVAILABLE_PROCESSORS").flatMap({ Int(String(cString: $0)) }) {
            #expect(available == expected)
        }
    }
}

/// A directory tree of cgroup-like files, removed when the test ends.
private final class FakeCgroupTree {
    let path: String
    init() throws {
        var template = Array("/tmp/loop-cgroup-XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw SystemFailure(call: "mkdtemp", code: errno)
        }
        path = String(cString: made)
    }
    deinit { remove(path) }

    func write(_ relativePath: String, _ text: String) {
        func writeBytes(_ descriptor: Int32, _ text: String) {
            _ = text.utf8CString.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress, $0.count - 1) }
        }
        let file = path + "/" + relativePath
        var directory = ""
        for component in file.split(separator: "/").dropLast() {
            directory += "/" + component
            mkdir(directory, 0o755)
        }
        let descriptor = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        precondition(descriptor >= 0, "cannot create \(file): errno \(errno)")
        writeBytes(descriptor, text)
        close(descriptor)
    }

    private func remove(_ directory: String) {
        guard let stream = opendir(directory) else { return }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name == "." || name == ".." { continue }
            let child = directory + "/" + name
            if entry.pointee.d_type == UInt8(DT_DIR) { remove(child) } else { unlink(child) }
        }
        closedir(stream)
        rmdir(directory)
    }
}

private struct SystemFailure: Error {
    let call: String
    let code: Int32
}
