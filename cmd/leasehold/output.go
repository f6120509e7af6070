package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// One output layer for every command: -o table (the default), -o wide
// (more columns where a table has them) or -o json, with --json kept as
// the alias of -o json. JSON is a documented structure of package cliout
// (docs/cli-json.md), never the API's protojson; tables come from one
// writer, with "-" for an empty cell.

// Output formats.
const (
	formatTable = "table"
	formatWide  = "wide"
	formatJSON  = "json"
)

// formatValue is -o's value; a bad one is refused while flags are parsed,
// so it is a usage error (exit 2) named after the flag.
type formatValue string

func (f *formatValue) String() string { return string(*f) }
func (f *formatValue) Type() string   { return "format" }
func (f *formatValue) Set(s string) error {
	switch s {
	case formatTable, formatWide, formatJSON:
		*f = formatValue(s)
		return nil
	}
	return fmt.Errorf("want table, wide or json")
}

// output is a command's choice of output format.
type output struct {
	format formatValue
	json   bool
}

// addOutput gives cmd the -o/--output and --json flags.
func addOutput(cmd *cobra.Command) *output {
	o := &output{format: formatTable}
	cmd.Flags().VarP(&o.format, "output", "o", "output format: table, wide or json")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON (the same as -o json; see docs/cli-json.md)")
	return o
}

// JSON reports whether the command prints JSON.
func (o *output) JSON() bool { return o.json || o.format == formatJSON }

// Wide reports whether a table shows every column.
func (o *output) Wide() bool { return o.format == formatWide }

// print writes v as JSON, or calls human for the table or text form.
func (o *output) print(w io.Writer, v any, human func(io.Writer) error) error {
	if o.JSON() {
		return writeJSON(w, v)
	}
	return human(w)
}

// writeJSON writes v as one indented JSON document. Commands that are not
// on the output layer yet (or new ones) print their plain struct with it.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeJSONLine writes v as one line of JSON: each item of a stream
// (watch, elect --observe).
func writeJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// table is the one table writer: columns aligned by text/tabwriter, two
// spaces apart, headers in capitals, "-" for an empty cell.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	fmt.Fprintln(t.tw, strings.Join(headers, "\t"))
	return t
}

// row writes one row; empty strings show as "-".
func (t *table) row(cells ...any) {
	s := make([]string, len(cells))
	for i, c := range cells {
		s[i] = fmt.Sprint(c)
		if s[i] == "" {
			s[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(s, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// plural is n with its noun in the right number: "1 message",
// "2 messages"; many is the plural ("" adds an s).
func plural[N ~int | ~int32 | ~int64 | ~uint32 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	if many == "" {
		many = one + "s"
	}
	return fmt.Sprintf("%d %s", n, many)
}
