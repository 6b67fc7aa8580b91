// Checks a TraceTimeline trace: it parses as Chrome trace-event JSON and holds, on named loop
// tracks, complete events for passes, callouts (timer, job) and the deliberate stall, each nested
// in its track (no two events of one thread overlap without one holding the other).
//
//   swift .ci/check-trace.swift trace.json
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("check-trace: \(message)\n".utf8))
    exit(1)
}

let path = CommandLine.arguments.dropFirst().first ?? "trace.json"
guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
guard let root = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
    let events = root["traceEvents"] as? [[String: Any]]
else { fail("\(path) is not trace-event JSON") }

let tracks = events.filter { $0["ph"] as? String == "M" && $0["name"] as? String == "thread_name" }
guard tracks.count == 2 else { fail("expected 2 named loop tracks, found \(tracks.count)") }
let complete = events.filter { $0["ph"] as? String == "X" }
for event in complete {
    guard event["ts"] is Double || event["ts"] is Int, event["dur"] is Double || event["dur"] is Int,
        event["pid"] is Int, event["tid"] is Int, event["name"] is String
    else { fail("malformed complete event: \(event)") }
}
func count(_ category: String) -> Int { complete.filter { $0["cat"] as? String == category }.count }
for category in ["pass", "wait", "timer", "job", "jobs", "stall"] where count(category) == 0 {
    fail("no \(category) events")
}
guard complete.contains(where: { $0["cat"] as? String == "stall" && ($0["args"] as? [String: Any])?["label"] as? String == "slow layout" })
else { fail("the stall does not name the \"slow layout\" timer") }

// Nesting, per thread (times in nanoseconds to compare exactly).
func nanoseconds(_ value: Any?) -> Int64 { Int64((((value as? Double) ?? Double(value as? Int ?? 0)) * 1000).rounded()) }
for (tid, group) in Dictionary(grouping: complete, by: { $0["tid"] as! Int }) {
    let spans = group.map { (nanoseconds($0["ts"]), nanoseconds($0["ts"]) + nanoseconds($0["dur"])) }.sorted { $0.0 < $1.0 || ($0.0 == $1.0 && $0.1 > $1.1) }
    var open: [Int64] = []  // ends of the spans holding the current one
    for (start, end) in spans {
        while let last = open.last, last <= start { open.removeLast() }
        if let last = open.last, end > last { fail("events overlap on thread \(tid) at \(start)") }
        open.append(end)
    }
}
print("check-trace: \(complete.count) events on \(tracks.count) tracks, nested; pass, callout and stall events present")
