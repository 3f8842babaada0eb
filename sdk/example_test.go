package sdk_test

// These examples need a running `warden serve`, so they have no Output
// lines: `go test` compiles them but does not run them.

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/warden-sandbox/warden/sdk"
)

// Connect, open a session and run Python in it like notebook cells: the
// variable defined by the first call is still there in the second.
func ExampleNew() {
	ctx := context.Background()
	c, err := sdk.New("http://127.0.0.1:8080", sdk.WithAPIKey(os.Getenv("WARDEN_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, &sdk.SessionCreate{
		Limits: sdk.Limits{MemoryBytes: 512 << 20, TimeoutSeconds: 30},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	if _, err := s.RunCode(ctx, sdk.LanguagePython, "total = sum(range(10))"); err != nil {
		log.Fatal(err)
	}
	res, err := s.RunCode(ctx, sdk.LanguagePython, "total * 2")
	if err != nil {
		log.Fatal(err)
	}
	if res.Exception != nil {
		log.Fatalf("%s: %s\n%s", res.Exception.Type, res.Exception.Message, res.Exception.Traceback)
	}
	fmt.Println(res.Value) // 90
}

// Draw a chart with matplotlib and save the PNG the session returns: every
// figure still open when the code ends comes back in Result.Outputs.
func ExampleSession_RunCode() {
	ctx := context.Background()
	c, err := sdk.New("http://127.0.0.1:8080", sdk.WithAPIKey(os.Getenv("WARDEN_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	res, err := s.RunCode(ctx, sdk.LanguagePython, `
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.title("squares")
`)
	if err != nil {
		log.Fatal(err)
	}
	pngs, err := res.PNGs()
	if err != nil {
		log.Fatal(err)
	}
	if len(pngs) == 0 {
		log.Fatalf("no chart; stderr: %s", res.Stderr)
	}
	if err := os.WriteFile("chart.png", pngs[0], 0o644); err != nil {
		log.Fatal(err)
	}
}

// Put a file into the session, let code change it, and read it back.
func ExampleSession_WriteFile() {
	ctx := context.Background()
	c, err := sdk.New("http://127.0.0.1:8080", sdk.WithAPIKey(os.Getenv("WARDEN_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	if _, err := s.WriteFile(ctx, "data/names.txt", strings.NewReader("bob\nalice\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if _, err := s.Run(ctx, "bash", "-c", "sort data/names.txt > data/sorted.txt"); err != nil {
		log.Fatal(err)
	}
	sorted, err := s.ReadFile(ctx, "data/sorted.txt")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(sorted))
}

// Show a long command's output as it happens, then its outcome.
func ExampleSession_Stream() {
	ctx := context.Background()
	c, err := sdk.New("http://127.0.0.1:8080", sdk.WithAPIKey(os.Getenv("WARDEN_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)

	req := sdk.ExecRequest{Command: []string{"bash", "-c", "for i in 1 2 3; do echo step $i; sleep 1; done"}}
	res, err := s.Stream(ctx, req, func(ev sdk.Event) error {
		switch ev.Type {
		case sdk.EventTypeStdout:
			fmt.Print(ev.Data)
		case sdk.EventTypeStderr:
			fmt.Fprint(os.Stderr, ev.Data)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", res.ExitCode)
}

// Run one command in a fresh sandbox that is thrown away afterwards.
func ExampleClient_Run() {
	c, err := sdk.New("http://127.0.0.1:8080", sdk.WithAPIKey(os.Getenv("WARDEN_API_KEY")))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Run(context.Background(), sdk.RunRequest{
		Command: []string{"python3", "-c", "print(2 ** 100)"},
		Limits:  sdk.Limits{TimeoutSeconds: 10},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(res.Stdout)
}
