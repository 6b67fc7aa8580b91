import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC R56 needs the process's main thread, which the test runner keeps, so the checks live in
/// the `MainLoopChecks` executable (built as a dependency of this target) and run here in a child
/// process.
@Suite("Main loop and the main dispatch queue (SPEC R56)")
struct MainLoopTests {
    @Test("R56 MainLoopChecks passes: main-queue and @MainActor work run in the main loop's common modes")
    func mainLoopChecks() throws {
        let executable = try #require(Self.checksExecutable())
        var pid: pid_t = 0
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup(executable), nil]
        defer { arguments.forEach { free($0) } }
        let spawned = posix_spawn(&pid, executable, nil, nil, arguments, environ)
        try #require(spawned == 0, "posix_spawn failed: \(spawned)")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exitedNormally = (status & 0x7f) == 0
        let exitCode = (status >> 8) & 0xff
        #expect(
            exitedNormally && exitCode == 0,
            "MainLoopChecks failed (status \(status)); run `swift run MainLoopChecks` to see which check")
    }

    /// `MainLoopChecks` next to the test bundle (same build directory).
    static func checksExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let candidate = String(path[..<slash]) + "/MainLoopChecks"
        return access(candidate, X_OK) == 0 ? candidate : nil
    }
}
