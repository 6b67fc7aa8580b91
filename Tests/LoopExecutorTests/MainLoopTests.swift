import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC R56 needs the process's main thread, which the test runner keeps, so the checks live in
/// the `MainLoopChecks` executable (built as a dependency of this target) and run here in a child
/// process.
@Suite("Main loop and the main dispatch queue (SPEC R56)", .timeLimit(.minutes(3)))
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

    @Test("Loop.runMain while a host runs the main loop traps with a message")
    func runMainWhileHosted() throws {
        let (status, errors) = try Self.runChecks("--run-main-while-hosted")
        #expect(status & 0x7f != 0, "expected a trap, got status \(status)")
        #expect(errors.contains("is run by a host (HostedLoop)"))
    }

    /// Runs the checks executable `name` with `argument`; returns its wait status and what it wrote to stderr.
    /// Stderr goes to a file, read after the child exited: a pipe would wait for every process
    /// that inherited it (a crash backtracer, say), not for the child.
    static func runChecks(
        _ argument: String, executable name: String = "MainLoopChecks"
    ) throws -> (status: Int32, errors: String) {
        let executable = try #require(checksExecutable(name))
        var template = Array("/tmp/main-loop-checks-XXXXXX".utf8CString)
        let file = mkstemp(&template)
        try #require(file >= 0, "mkstemp failed: \(errno)")
        let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer {
            close(file)
            unlink(path)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, file, 2)
        var pid: pid_t = 0
        let arguments: [UnsafeMutablePointer<CChar>?] = [strdup(executable), strdup(argument), nil]
        defer { arguments.forEach { free($0) } }
        // The trap is expected: no backtrace (slow, and under the thread sanitizer the backtracer's
        // fork trips the sanitizer's own checks).
        var environment: [UnsafeMutablePointer<CChar>?] = [strdup("SWIFT_BACKTRACE=enable=no")]
        var entry = environ
        while let variable = entry.pointee {
            if !String(cString: variable).hasPrefix("SWIFT_BACKTRACE=") { environment.append(strdup(variable)) }
            entry += 1
        }
        environment.append(nil)
        defer { environment.forEach { free($0) } }
        let spawned = posix_spawn(&pid, executable, &actions, nil, arguments, environment)
        try #require(spawned == 0, "posix_spawn failed: \(spawned)")
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        lseek(file, 0, SEEK_SET)
        while true {
            let count = read(file, &buffer, buffer.count)
            guard count > 0 else { break }
            output += buffer[..<count]
        }
        return (status, String(decoding: output, as: UTF8.self))
    }

    /// The checks executable `name` next to the test bundle (same build directory).
    static func checksExecutable(_ name: String = "MainLoopChecks") -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = path.lastIndex(of: "/") else { return nil }
        let candidate = String(path[..<slash]) + "/" + name
        return access(candidate, X_OK) == 0 ? candidate : nil
    }
}
