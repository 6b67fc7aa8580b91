/// A value that may be touched only on one loop's thread, in a box that may travel to any thread.
///
/// Code that runs on a loop — its callouts, the actors pinned to it — often keeps state that is not
/// `Sendable` (a C handle, a parser, a class with mutable fields) and must hand it to closures that
/// the compiler requires to be `@Sendable`: `perform`, a timer's handler, `submit`. `LoopBound`
/// carries the value there and checks, on every access, that the access is made on the loop's
/// thread, where only one callout runs at a time — so the value needs no lock and no
/// `@unchecked Sendable` of your own. An access from another thread traps, naming both threads.
///
/// ```swift
/// let parser = LoopBound(Parser(), loop: thread.loop)     // made on the loop's thread
/// source.handler = { _, _ in
///     parser.value.feed(bytes)                              // checked: on the loop's thread
/// }
/// ```
///
/// The box checks accesses made through it. A reference read out of ``value`` (a class instance)
/// is no longer checked: keep such a reference inside the loop's callouts, or change the value in
/// place with ``withValue(_:)``.
///
/// It is a value type, like the value it holds: each copy has its own value (a copy of the one it
/// was made from, so a class instance inside is shared). For one value that several closures
/// change, use ``LoopBoundBox``. SwiftNIO users know it as `NIOLoopBound`.
///
/// - Important: Copying, storing and passing the box are safe from any thread; reading or changing
///   ``value`` only on the loop's thread. The value may be released on another thread, where the
///   last copy of the box goes away.
public struct LoopBound<Value>: @unchecked Sendable {
    // `@unchecked`: `storage` is read and written only through `value` and `withValue`, which trap
    // off the loop's thread, so every access to it is made by that one thread (and a callout there
    // runs to completion before the next one starts). The value either was made there (the
    // unlabelled initializer checks) or was handed over with `sending`, so no other thread keeps
    // a reference to it.
    @usableFromInline var storage: Value

    /// The loop on whose thread the value may be used.
    ///
    /// - Important: Safe from any thread (immutable).
    public let loop: Loop

    /// Binds `value` to `loop`; call on the loop's thread.
    ///
    /// - Precondition: called on `loop`'s thread (a value made elsewhere may still be reachable
    ///   there: hand it over with ``init(sending:loop:)``).
    @inlinable
    public init(_ value: sending Value, loop: Loop) {
        self.init(value, loop: loop, checkedAs: "LoopBound")
    }

    /// Binds `value` to `loop` from any thread: `sending` hands it over, so the caller keeps no
    /// other reference to it.
    ///
    /// - Important: Safe from any thread.
    @inlinable
    public init(sending value: sending Value, loop: Loop) {
        self.storage = value
        self.loop = loop
    }

    /// The on-thread initializer, its trap naming `type` (`LoopBound` or `LoopBoundBox`).
    @inlinable
    init(_ value: sending Value, loop: Loop, checkedAs type: StaticString) {
        loop.preconditionOnLoop(
            "\(type).init: the value must be made on the loop's thread; use init(sending:loop:) elsewhere")
        self.storage = value
        self.loop = loop
    }

    /// The value.
    ///
    /// - Precondition: read or set on the loop's thread.
    @inlinable
    public var value: Value {
        get { self[checkedAs: "LoopBound"] }
        set { self[checkedAs: "LoopBound"] = newValue }
    }

    /// Runs `body` on the value in place (no copy), on the loop's thread.
    ///
    /// - Precondition: called on the loop's thread.
    @inlinable
    public mutating func withValue<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try withValue(checkedAs: "LoopBound", body)
    }

    /// The one way to `storage`: traps off the loop's thread, naming `type` (`LoopBound` or
    /// `LoopBoundBox`).
    @inlinable
    subscript(checkedAs type: StaticString) -> Value {
        get {
            loop.preconditionOnLoop("\(type).value")
            return storage
        }
        set {
            loop.preconditionOnLoop("\(type).value")
            storage = newValue
        }
    }

    /// `withValue`, its trap naming `type`.
    @inlinable
    mutating func withValue<Result, Failure: Error>(
        checkedAs type: StaticString, _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        loop.preconditionOnLoop("\(type).withValue")
        return try body(&storage)
    }
}

/// One value shared by every holder of the box, which may be touched only on one loop's thread.
///
/// ``LoopBound``'s reference-type twin: the closures that capture the same box (a source's handler
/// and a timer's, say) see each other's changes. Every access checks that it is made on the loop's
/// thread, and traps otherwise. SwiftNIO users know it as `NIOLoopBoundBox`.
///
/// ```swift
/// let received = LoopBoundBox(0, loop: thread.loop)
/// source.handler = { _, _ in received.value += 1 }
/// timer = LoopTimer(after: .seconds(1), interval: .seconds(1)) { _ in print(received.value) }
/// ```
///
/// - Important: Passing the box is safe from any thread; reading or changing ``value`` only on
///   the loop's thread. The value is released where the last reference to the box goes away.
public final class LoopBoundBox<Value>: @unchecked Sendable {
    // `@unchecked`: the value lives in a `LoopBound`, reached only through its checked accessors,
    // so only on the loop's thread; the box adds nothing but one shared place for it.
    @usableFromInline var bound: LoopBound<Value>

    /// The loop on whose thread the value may be used.
    ///
    /// - Important: Safe from any thread (immutable).
    public let loop: Loop  // also in `bound`; kept here so that reading it is no access to `bound`

    /// Binds `value` to `loop`; call on the loop's thread.
    ///
    /// - Precondition: called on `loop`'s thread (hand a value made elsewhere over with
    ///   ``init(sending:loop:)``).
    @inlinable
    public init(_ value: sending Value, loop: Loop) {
        self.bound = LoopBound(value, loop: loop, checkedAs: "LoopBoundBox")
        self.loop = loop
    }

    /// Binds `value` to `loop` from any thread: `sending` hands it over.
    ///
    /// - Important: Safe from any thread.
    @inlinable
    public init(sending value: sending Value, loop: Loop) {
        self.bound = LoopBound(sending: value, loop: loop)
        self.loop = loop
    }

    /// The value.
    ///
    /// - Precondition: read or set on the loop's thread.
    @inlinable
    public var value: Value {
        get { bound[checkedAs: "LoopBoundBox"] }
        set { bound[checkedAs: "LoopBoundBox"] = newValue }
    }

    /// Runs `body` on the value in place, on the loop's thread.
    ///
    /// - Precondition: called on the loop's thread.
    @inlinable
    public func withValue<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure)
        -> Result
    {
        try bound.withValue(checkedAs: "LoopBoundBox", body)
    }
}
