package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Every duration flag goes through parseDuration: Go's syntax plus days
// ("--since 1d", "1d12h"), as people type them. A bad value is refused
// while flags are parsed (exit 2), naming the flag and an example.

var durPart = regexp.MustCompile(`([0-9]*\.?[0-9]+)([a-zµμ]+)`)

// durationExample ends every malformed-duration message.
const durationExample = "want a duration such as 90s, 15m, 1h30m or 1d12h (units ms, s, m, h, d)"

// parseDuration parses s as time.ParseDuration does, and also accepts the
// unit d (24h) in any part: "1d", "1.5d", "1d12h".
func parseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "0" {
		return 0, nil
	}
	neg := strings.HasPrefix(t, "-")
	t = strings.TrimLeft(t, "+-")
	if t == "" || durPart.ReplaceAllString(t, "") != "" {
		return 0, fmt.Errorf("%q: %s", s, durationExample)
	}
	var total float64
	for _, m := range durPart.FindAllStringSubmatch(t, -1) {
		if m[2] == "d" {
			n, err := strconv.ParseFloat(m[1], 64)
			if err != nil {
				return 0, fmt.Errorf("%q: %s", s, durationExample)
			}
			total += n * float64(24*time.Hour)
			continue
		}
		d, err := time.ParseDuration(m[0])
		if err != nil {
			return 0, fmt.Errorf("%q: %s", s, durationExample)
		}
		total += float64(d)
	}
	if total > math.MaxInt64 {
		return 0, fmt.Errorf("%q: too long", s)
	}
	if neg {
		total = -total
	}
	return time.Duration(total), nil
}

// durationValue is a duration flag's value.
type durationValue time.Duration

func (d *durationValue) String() string { return time.Duration(*d).String() }
func (d *durationValue) Type() string   { return "duration" }
func (d *durationValue) Set(s string) error {
	v, err := parseDuration(s)
	if err != nil {
		return err
	}
	*d = durationValue(v)
	return nil
}

// durationVar defines a duration flag that takes days too.
func durationVar(fs *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	fs.Var((*durationValue)(p), name, usage)
}

// forever is the word --wait takes for "until granted or interrupted".
const forever = "forever"

// waitFlag is --wait of acquire and run: a duration, or forever.
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return forever
	}
	return w.d.String()
}

func (w *waitFlag) Type() string { return "duration" }

func (w *waitFlag) Set(s string) error {
	if strings.TrimSpace(s) == forever {
		*w = waitFlag{forever: true}
		return nil
	}
	d, err := parseDuration(s)
	if err != nil {
		return fmt.Errorf("%w, or forever", err)
	}
	if d < 0 {
		return fmt.Errorf("%q: must not be negative", s)
	}
	*w = waitFlag{d: d}
	return nil
}

// waitVar defines a --wait flag that takes a duration or forever.
func waitVar(fs *pflag.FlagSet, w *waitFlag, def time.Duration, usage string) {
	*w = waitFlag{d: def}
	fs.Var(w, "wait", usage)
}
