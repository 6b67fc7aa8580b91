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

    @Test("withMode to a mode outside the common set, from the main actor, traps with a message")
    func withModeFromTheMainActor() throws {
        let (status, errors) = try Self.runChecks("--with-mode-from-main-actor")
        #expect(status & 0x7f != 0, "expected a trap, got status \(status)")
        #expect(errors.contains("the main actor runs only in the main loop's common modes"))
    }

    @Test("Loop.runMain from async code traps with a message")
    func runMainFromATask() throws {
        let (status, errors) = try Self.runChecks("--run-main-from-a-task")
        #expect(status & 0x7f != 0, "expected a trap, got status \(status)")
        #expect(errors.contains("was called from async code"))
    }

    /// Runs `MainLoopChecks` with `argument`; returns its wait status and what it wrote to stderr.
    static func runChecks(_ argument: String) throws -> (status: Int32, errors: String) {
        let executable = try #require(checksExecutable())
        var pipeEnds: [Int32] = [0, 0]
        try #require(pipe(&pipeEnds) == 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        posix_spawn_file_actions_addclose(&actions, pipeEnds[0])
        var pid: pid_t = 0
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup(executable), strdup(argument), nil]
        defer { arguments.forEach { free($0) } }
        let spawned = posix_spawn(&pid, executable, &actions, nil, arguments, environ)
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        try #require(spawned == 0, "posix_spawn failed: \(spawned)")
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(pipeEnds[0], &buffer, buffer.count)
            if count > 0 {
                output += buffer[..<count]
            } else if count == 0 || errno != EINTR {
                break
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status, String(decoding: output, as: UTF8.self))
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
