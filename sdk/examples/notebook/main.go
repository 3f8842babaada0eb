// Command notebook drives a Warden session the way a notebook (or an LLM
// agent) would: load data, keep it in a variable across cells, compute,
// draw a chart and fetch it as chart.png.
//
//	WARDEN_API_KEY=... go run ./sdk/examples/notebook -url http://127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strings"

	"github.com/warden-sandbox/warden/sdk"
)

// cells run in order in one Python interpreter; later cells use the
// variables earlier ones defined, as in a notebook. A figure left open at
// the end of a cell comes back as a PNG output.
var cells = []string{
	`import csv
with open("sales.csv") as f:
    rows = list(csv.DictReader(f))
len(rows)`,
	`totals = {}
for r in rows:
    totals[r["month"]] = totals.get(r["month"], 0) + int(r["amount"])
totals`,
	`import matplotlib.pyplot as plt
plt.bar(list(totals), list(totals.values()))
plt.title("Sales by month")`,
}

const salesCSV = `month,amount
jan,120
jan,80
feb,150
mar,90
mar,160
`

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "Warden server URL")
	key := flag.String("key", os.Getenv("WARDEN_API_KEY"), "API key (default $WARDEN_API_KEY)")
	out := flag.String("out", "chart.png", "where to write the chart")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *url, *key, *out); err != nil {
		log.Fatal(err)
	}
}

// run does the whole sequence in one session, closing it however the
// sequence ends, and writes the last chart drawn to out.
func run(ctx context.Context, url, key, out string) (err error) {
	c, err := sdk.New(url, sdk.WithAPIKey(key))
	if err != nil {
		return err
	}
	s, err := c.NewSession(ctx, &sdk.SessionCreate{
		Limits:             sdk.Limits{MemoryBytes: 1 << 30, TimeoutSeconds: 60},
		IdleTimeoutSeconds: 300,
	})
	if err != nil {
		return err
	}
	// Close with a fresh context so the session is freed even after ^C.
	defer func() { err = errors.Join(err, s.Close(context.WithoutCancel(ctx))) }()
	fmt.Println("session", s.ID())

	if _, err := s.WriteFile(ctx, "sales.csv", strings.NewReader(salesCSV), 0o644); err != nil {
		return err
	}
	var chart []byte
	for i, code := range cells {
		res, err := s.RunCode(ctx, sdk.LanguagePython, code)
		if err != nil {
			return fmt.Errorf("cell %d: %w", i+1, err)
		}
		fmt.Printf("[%d] %s", i+1, res.Stdout)
		if res.Exception != nil {
			return fmt.Errorf("cell %d raised %s: %s\n%s", i+1, res.Exception.Type, res.Exception.Message, res.Exception.Traceback)
		}
		if res.Value != "" {
			fmt.Printf("[%d] => %s\n", i+1, res.Value)
		}
		pngs, err := res.PNGs()
		if err != nil {
			return fmt.Errorf("cell %d: %w", i+1, err)
		}
		if len(pngs) > 0 {
			chart = pngs[len(pngs)-1]
		}
	}
	if chart == nil {
		return errors.New("no chart was drawn (is matplotlib installed on the server host?)")
	}
	if err := os.WriteFile(out, chart, 0o644); err != nil {
		return fmt.Errorf("saving chart: %w", err)
	}
	fmt.Println("wrote", out)
	return nil
}
