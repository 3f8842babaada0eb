package plan

// The namespace handshake: warden run starts warden-exec in its own
// namespaces (so Go can vfork it) and warden-exec makes the sandbox's
// with it before it reads a plan (docs/protocol.md). The host sends
// HelloTag and a u32 Version (which no plan's length can be: it reads as
// more than MaxBytes, so a warden-exec of an older build refuses it as
// a plan at once); warden-exec answers UsernsTag once it has unshared its
// user namespace; the host writes its id maps and sends MappedTag with a
// u64 of the namespaces to unshare next and a u64 of the capabilities
// PID 1 keeps; warden-exec answers PidTag with PID 1's pid, or, at any
// step, FailedTag with the step (Step*) and an errno. warden-exec's
// messages are a tag and two u32s, little-endian, 12 bytes.
const (
	HelloTag  = "WXNS"
	MappedTag = "WXMP"
	UsernsTag = "WXUS"
	PidTag    = "WXPD"
	FailedTag = "WXER"
)

// The steps a FailedTag message names, as cmd/warden-exec/exec.h
// numbers them.
const (
	StepHello = iota + 1
	StepUserns
	StepMapped
	StepNamespaces
	StepCaps
	StepClone
)

// UnshareSteps says what each Step* was doing, for the host's error.
var UnshareSteps = map[uint32]string{
	StepHello: "reading the host's hello", StepUserns: "unsharing its user namespace",
	StepMapped: "reading the host's id maps message", StepNamespaces: "unsharing the other namespaces",
	StepCaps: "setting its capabilities", StepClone: "forking PID 1",
}
