package fsm

import "io"

// spillSize is how many encoded bytes a streamed snapshot gathers before
// it hands them on.
const spillSize = 64 << 10

// WriteSnapshot writes the encoding Snapshot returns to w, in slices of
// about 64 KiB as the sections are encoded: 100,000 leases encode to tens
// of megabytes, which the node would otherwise hold at once on top of the
// state (raft snapshots every 30 s or so under load, so that was the
// node's memory peak). It returns w's first error.
func (s *State) WriteSnapshot(w io.Writer) error {
	e := encoder{b: make([]byte, 0, spillSize+spillSize/4), w: w}
	e.b = append(e.b, snapMagic...)
	e.byte1(snapVersion)
	for _, sec := range sections {
		sec.write(s, &e)
	}
	e.flush()
	return e.err
}

// spill hands what e holds to its writer, if it has one and holds at
// least spillSize bytes. Sections call it between items.
func (e *encoder) spill() {
	if e.w != nil && len(e.b) >= spillSize {
		e.flush()
	}
}

func (e *encoder) flush() {
	if e.err == nil && len(e.b) > 0 {
		_, e.err = e.w.Write(e.b)
	}
	e.b = e.b[:0]
}
