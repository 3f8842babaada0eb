package main

import (
	"strconv"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// sizeFlag is a pflag.Value that parses sizes like 256MiB, so a bad value
// is refused by the flag parser with a message naming the flag.
type sizeFlag struct{ v *int64 }

func (f sizeFlag) String() string {
	if f.v == nil || *f.v == 0 {
		return "0"
	}
	return spec.FormatSize(*f.v)
}
func (f sizeFlag) Set(s string) (err error) { *f.v, err = spec.ParseSize(s); return err }
func (f sizeFlag) Type() string             { return "size" }

// durationFlag parses Go durations and refuses bare numbers.
type durationFlag struct{ v *time.Duration }

func (f durationFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return f.v.String()
}
func (f durationFlag) Set(s string) (err error) { *f.v, err = spec.ParseDuration(s); return err }
func (f durationFlag) Type() string             { return "duration" }

// cpusFlag parses a fractional core count.
type cpusFlag struct{ v *float64 }

func (f cpusFlag) String() string {
	if f.v == nil {
		return "0"
	}
	return strconv.FormatFloat(*f.v, 'f', -1, 64)
}
func (f cpusFlag) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return errCPUs(s)
	}
	*f.v = v
	return nil
}
func (f cpusFlag) Type() string { return "cores" }

type errCPUs string

func (e errCPUs) Error() string {
	return "cpus " + strconv.Quote(string(e)) + " is not a number of cores: write e.g. 1, 0.5 or 2"
}

// listFlag is a repeatable string flag: each use adds its value whole,
// commas and all, as pflag's StringArray does, whose help type it keeps.
// pflag's own formats the default with encoding/csv when the flag is
// defined (a 4 KB buffer each), which every `warden run` paid for three
// flags it rarely uses (docs/performance.md, "The CLI's start").
type listFlag struct{ v *[]string }

// String is empty for no values, so help shows no default, as for
// pflag's StringArray. Otherwise each value is CSV-quoted, as pflag's
// StringArray writes it, because pflag's GetStringArray reads String back
// as CSV: joined bare, `--allow "a.example,evil.example"` would read back
// as two hosts.
func (f listFlag) String() string {
	if f.v == nil || len(*f.v) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('[')
	for i, s := range *f.v {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + strings.ReplaceAll(s, `"`, `""`) + `"`)
	}
	b.WriteByte(']')
	return b.String()
}
func (f listFlag) Set(s string) error { *f.v = append(*f.v, s); return nil }
func (f listFlag) Type() string       { return "stringArray" }

// Append, Replace and GetSlice make listFlag a pflag.SliceValue, as
// pflag's StringArray is.
func (f listFlag) Append(s string) error    { return f.Set(s) }
func (f listFlag) Replace(s []string) error { *f.v = append([]string(nil), s...); return nil }
func (f listFlag) GetSlice() []string       { return append([]string(nil), *f.v...) }
