// ModalRun — a nested ("modal") run: a callout runs the loop again in a "modal" mode until the
// dialog is dismissed. Only modal-mode items run meanwhile; the outer run resumes its pass after.
//
//   swift run ModalRun

import LoopRuntime
import Synchronization

let modal: Loop.Mode = "modal"
let loop = Loop.current

// Background work of the default mode: frozen while the modal run is on.
let background = LoopTimer(after: .milliseconds(10), interval: .milliseconds(10)) { _ in
    print("  background tick (\(Loop.current.currentMode!))")
}
loop.add(background, forMode: .default)

// The "dialog": a modal-mode timer that answers after three blinks, then stops the modal run.
let blinks = Atomic<Int>(0)
let dialog = LoopTimer(after: .milliseconds(15), interval: .milliseconds(15)) { timer in
    print("  dialog blinks (\(Loop.current.currentMode!))")
    if blinks.wrappingAdd(1, ordering: .relaxed).newValue == 3 {
        print("  dialog dismissed")
        timer.invalidate()
        loop.stop()  // stops the innermost run: the modal one (SPEC R66)
    }
}
loop.add(dialog, forMode: modal)

// After 25 ms, a default-mode timer opens the dialog: a nested run in the modal mode (SPEC R18).
loop.add(
    LoopTimer(after: .milliseconds(25)) { _ in
        print("open the dialog — entering a modal run")
        let result = loop.run(modal, for: .seconds(5))
        print("modal run returned .\(result); back in \(loop.currentMode!)")
    }, forMode: .default)

let result = loop.run(.default, for: .milliseconds(120))
print("outer run returned .\(result)")
background.invalidate()
