package templatetest

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
)

// ChartCode imports pandas, which the host lacks, and shows a chart.
const ChartCode = "import pandas as pd, matplotlib.pyplot as plt\n" +
	"df = pd.DataFrame({'x': [1, 2, 3], 'y': [1, 4, 9]})\n" +
	"df.plot(x='x', y='y')\nplt.show()\npd.__version__"

// ChartSession is what CheckChart needs of a backend's session: it starts
// the interpreter and gives its environment (agent.Session is one).
type ChartSession interface {
	interp.Spawner
	Env(extra ...string) []string
}

// CheckChart runs ChartCode in the Python interpreter of sess, on root,
// and checks it returned pandas' version and one PNG: the one chart check
// of every backend's datasci test.
func CheckChart(t *testing.T, sess ChartSession, root spec.Root) {
	t.Helper()
	if got := interp.Available(root.Dir); !strings.Contains(strings.Join(got, ","), "python") {
		t.Fatalf("interp.Available(%s) = %v, want python", root.Template, got)
	}
	in, err := interp.New("python", sess, sess.Env(), interp.WithRoot(root.Dir))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := in.Run(ctx, ChartCode, nil, nil)
	if err != nil {
		t.Fatalf("running pandas and matplotlib: %v", err)
	}
	CheckChartResult(t, out.Value, out.Exception, out.Outputs)
}

// CheckChartResult checks what ChartCode returned, however it came back
// (an interpreter's Run, the API's Result, MCP's run_code): no exception,
// pandas' version as the value, and one PNG.
func CheckChartResult(t testing.TB, value string, exc *spec.Exception, outputs []spec.Output) {
	t.Helper()
	if exc != nil {
		t.Fatalf("running pandas and matplotlib: exception %+v", exc)
	}
	if value == "" || len(outputs) != 1 || outputs[0].MimeType != "image/png" {
		t.Fatalf("got value %q and %d outputs, want pandas' version and one PNG", value, len(outputs))
	}
	png, err := base64.StdEncoding.DecodeString(outputs[0].Data)
	if err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("the chart is not a PNG (%v)", err)
	}
}
