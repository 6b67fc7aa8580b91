// Fails when a public symbol of a module has no page in its documentation archive.
//
// Usage: swift .ci/doc-coverage.swift <symbol-graph-dir> <archive.doccarchive>
//
// Every symbol in the module's symbol graphs — its own, and the `Module@Other` graphs of its
// extensions to other modules' types — must have a page whose `metadata.externalID` is the
// symbol's identifier. (DocC silently left out a module's extensions when the graphs lacked
// extension blocks: this is the check that would have caught it.)

import Foundation

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    print("usage: doc-coverage <symbol-graph-dir> <archive.doccarchive>")
    exit(2)
}
let graphs = URL(fileURLWithPath: arguments[1])
let archive = URL(fileURLWithPath: arguments[2]).appendingPathComponent("data/documentation")

func jsonFiles(under directory: URL) -> [URL] {
    let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)
    return (files?.allObjects as? [URL] ?? []).filter { $0.pathExtension == "json" }
}

func object(_ url: URL) -> [String: Any] {
    guard let data = try? Data(contentsOf: url),
        let value = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
    else {
        print("error: cannot read \(url.path)")
        exit(2)
    }
    return value
}

var expected: [String: String] = [:]  // identifier → readable path
for url in jsonFiles(under: graphs) where url.lastPathComponent.hasSuffix(".symbols.json") {
    for symbol in object(url)["symbols"] as? [[String: Any]] ?? [] {
        let kind = (symbol["kind"] as? [String: Any])?["identifier"] as? String
        guard kind != "swift.extension", symbol["accessLevel"] as? String != "private" else { continue }
        guard let identifier = (symbol["identifier"] as? [String: Any])?["precise"] as? String else { continue }
        let path = (symbol["pathComponents"] as? [String] ?? []).joined(separator: ".")
        expected[identifier] = path
    }
}

var documented = Set<String>()
for url in jsonFiles(under: archive) {
    if let identifier = (object(url)["metadata"] as? [String: Any])?["externalID"] as? String {
        documented.insert(identifier)
    }
}

let missing = expected.filter { !documented.contains($0.key) }.map(\.value).sorted()
if missing.isEmpty {
    print("doc coverage: all \(expected.count) public symbols have a page")
} else {
    print("error: \(missing.count) of \(expected.count) public symbols have no page:")
    for path in missing { print("  \(path)") }
    exit(1)
}
