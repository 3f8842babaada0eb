package sandbox

import (
	"context"
	"os/exec"
	"testing"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/state"
)

// countingBox numbers its spawns as an agent does; others is how many
// processes someone else starts on it during each spawn.
type countingBox struct {
	Box
	last, others uint64
}

func (b *countingBox) Spawn(context.Context, interp.Command) (interp.Process, error) {
	b.last += 1 + b.others
	return nil, nil
}

func (b *countingBox) LastID() uint64 { return b.last }

// TestIDSpawner: an interpreter's process ID is kept only when no other
// process started on the box during its spawn; else it is unknown (0),
// and the interpreter starts afresh after a restore.
func TestIDSpawner(t *testing.T) {
	for _, tc := range []struct {
		others uint64
		want   uint64
	}{{0, 1}, {1, 0}, {3, 0}} {
		box := &countingBox{others: tc.others}
		sp := &idSpawner{box: box, ids: box}
		if _, err := sp.Spawn(context.Background(), interp.Command{}); err != nil {
			t.Fatal(err)
		}
		if got := sp.id.Load(); got != tc.want {
			t.Errorf("with %d other spawns: got ID %d, want %d", tc.others, got, tc.want)
		}
	}
}

// TestValidInterpreters: a record's interpreters are read strictly.
func TestValidInterpreters(t *testing.T) {
	for _, tc := range []struct {
		recs []state.Interpreter
		ok   bool
	}{
		{[]state.Interpreter{{Language: "python", Process: 3}, {Language: "python", Name: "a", Process: 4}}, true},
		{[]state.Interpreter{{Language: "cobol", Process: 3}}, false},
		{[]state.Interpreter{{Language: "python", Name: "../x", Process: 3}}, false},
		{[]state.Interpreter{{Language: "python"}}, false},
		{[]state.Interpreter{{Language: "python", Process: 3}, {Language: "python", Process: 4}}, false},
	} {
		if err := validInterpreters(tc.recs); (err == nil) != tc.ok {
			t.Errorf("validInterpreters(%+v) = %v, want ok %v", tc.recs, err, tc.ok)
		}
	}
}

// memOn asks a test's snapshot for the box's memory where the backend
// can save it, as the API's default does.
var memOn = SnapshotOptions{Memory: true}

// TestReseedCodePython runs the Python reseed on the host's python3: it
// reseeds random (a state set before differs after), drops tempfile's
// name sequence, and reseeds NumPy's global generator where NumPy is
// installed; where a module was not imported it imports nothing.
func TestReseedCodePython(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 on the host")
	}
	probe := `import sys
assert 'tempfile' not in sys.modules and 'numpy' not in sys.modules
exec(sys.argv[1])
assert 'tempfile' not in sys.modules, 'the reseed imported tempfile'
import random, tempfile
random.seed(1); next(tempfile._get_candidate_names())
before = random.getstate()
exec(sys.argv[1])
assert random.getstate() != before, 'random not reseeded'
assert tempfile._name_sequence is None, 'tempfile names not reseeded'
try:
    import numpy
except ImportError:
    sys.exit(0)
numpy.random.seed(1)
exec(sys.argv[1])
numpy.random.seed(1); a = numpy.random.random()
exec(sys.argv[1])
assert numpy.random.random() != a, 'numpy not reseeded'
`
	out, err := exec.Command(py, "-S", "-c", probe, reseedCode["python"]).CombinedOutput()
	if err != nil {
		t.Errorf("the reseed on python3: %v\n%s", err, out)
	}
}
