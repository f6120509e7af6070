package fsm

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// The wire format is hand-rolled varints and length-prefixed strings: it is
// allocation-light, deterministic (maps are written sorted) and small. Every
// decoder checks lengths against the bytes left, so a corrupt or hostile
// input fails with errCorrupt instead of allocating or panicking.

var errCorrupt = errors.New("fsm: corrupt encoding")

type encoder struct {
	b []byte
	// w, if set, takes the bytes in slices as they pile up (spill): a
	// snapshot is written as it is encoded, never held whole.
	w   io.Writer
	err error // w's first error
}

func (e *encoder) byte1(v byte)     { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) bool(v bool) {
	if v {
		e.byte1(1)
	} else {
		e.byte1(0)
	}
}
func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) hash(h [32]byte) { e.b = append(e.b, h[:]...) }
func (e *encoder) strs(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

// strMap writes keys in sorted order so equal maps encode equally.
func (e *encoder) strMap(m map[string]string) {
	keys := sortedKeys(m)
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
		e.str(m[k])
	}
}

type decoder struct {
	b   []byte
	err error
	// legacy marks an encoding from before request IDs were scoped to
	// their caller (batch version 1, snapshot version 4): commands carry
	// no caller.
	legacy bool
	// version is the body version of the command being decoded (1 to its
	// row's version; 1 for entries before batch version 3). A command
	// reads a field added in body version n only when version >= n.
	version byte
}

// caller reads a command's caller, which a legacy encoding lacks.
func (d *decoder) caller() string {
	if d.legacy {
		return ""
	}
	return d.str()
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool {
	switch d.byte1() {
	case 0:
		return false
	case 1:
		return true
	}
	d.fail()
	return false
}

// count reads a collection length and refuses one that cannot fit in the
// remaining bytes (each element takes at least minSize bytes).
func (d *decoder) count(minSize int) int {
	n := d.uvarint()
	if n > math.MaxInt32 || int(n)*minSize > len(d.b) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) hash() (h [32]byte) {
	if len(d.b) < 32 {
		d.fail()
		return h
	}
	copy(h[:], d.b[:32])
	d.b = d.b[32:]
	return h
}

func (d *decoder) fingerprint() (f fingerprint) {
	if len(d.b) < len(f) {
		d.fail()
		return f
	}
	copy(f[:], d.b[:len(f)])
	d.b = d.b[len(f):]
	return f
}

func (d *decoder) strs() []string {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	ss := make([]string, n)
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func (d *decoder) strMap() map[string]string {
	n := d.count(2)
	if n == 0 {
		return nil
	}
	m := make(map[string]string, n)
	for range n {
		k := d.str()
		m[k] = d.str()
	}
	return m
}
