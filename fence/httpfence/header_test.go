package httpfence_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/api/leasehold"
	"github.com/leasehold/leasehold/fence/httpfence"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		resource string
		token    uint64
		want     string
	}{
		{"orders/42", 7, "resource=orders/42; token=7"},
		{"a-b.c_d~e:f@g", 0, "resource=a-b.c_d~e:f@g; token=0"},
		{"batch; id=7", 1, "resource=batch%3B%20id%3D7; token=1"},
		{"café", 2, "resource=caf%C3%A9; token=2"},
		{`100% "quoted", \back`, 3, "resource=100%25%20%22quoted%22%2C%20%5Cback; token=3"},
		{"x", math.MaxUint64, "resource=x; token=18446744073709551615"},
	} {
		got, err := httpfence.Format(tc.resource, tc.token)
		if err != nil || got != tc.want {
			t.Errorf("Format(%q, %d) = %q, %v; want %q", tc.resource, tc.token, got, err, tc.want)
			continue
		}
		f, err := httpfence.Parse(got)
		if err != nil || f.Resource != tc.resource || f.Token != tc.token {
			t.Errorf("Parse(%q) = %+v, %v", got, f, err)
		}
	}
	for _, bad := range []string{"", "tab\t", "nul\x00", "\xff\xfe", strings.Repeat("r", leasehold.MaxResourceLen+1)} {
		if _, err := httpfence.Format(bad, 1); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Format(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestParseLenient(t *testing.T) {
	want := httpfence.Fence{Resource: "a b/c", Token: 12}
	for _, v := range []string{
		"resource=a%20b/c; token=12",
		"resource=a%20b/c;token=12",
		"  resource=a%20b/c \t;\t token=12  ",
		"token=12; resource=a%20b/c",
		"Resource=a%20b/c; TOKEN=12",
		"resource=%61%20%62%2f%63; token=12", // needless and lower-case escapes
	} {
		f, err := httpfence.Parse(v)
		if err != nil || f != want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", v, f, err, want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, v := range []string{
		"",
		";",
		"resource=a",
		"token=1",
		"resource=a; token=1;",
		"resource=a; token=1; lease=2",
		"resource=a; resource=b; token=1",
		"resource=a; token=1; token=1",
		"resource=; token=1",
		"resource=a; token=",
		"resource=a; token=-1",
		"resource=a; token=+1",
		"resource=a; token=01",
		"resource=a; token=1.0",
		"resource=a; token=0x10",
		"resource=a; token=18446744073709551616",
		"resource=a; token = 1",
		"resource = a; token=1",
		"resource=a b; token=1",
		`resource="a"; token=1`,
		"resource=a,b; token=1",
		"resource=a=b; token=1",
		"resource=50%; token=1",
		"resource=%4; token=1",
		"resource=%zz; token=1",
		"resource=%00; token=1",         // NUL is not printable
		"resource=%09; token=1",         // nor is a tab
		"resource=%FF; token=1",         // not UTF-8
		"resource=caf\xc3\xa9; token=1", // raw UTF-8 must be escaped
		"to\u212aen=1; resource=a",      // Kelvin sign is not a K
		"resource=" + strings.Repeat("r", leasehold.MaxResourceLen+1) + "; token=1",
		"resource=a; token=1" + strings.Repeat(" ", 1100),
	} {
		if f, err := httpfence.Parse(v); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Parse(%q) = %+v, %v; want an invalid error", v, f, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"resource=orders/42; token=7",
		"token=0;resource=x",
		"resource=batch%3B%20id%3D7; token=18446744073709551615",
		"resource=caf%c3%a9; token=1",
		"resource=%; token=1",
		"resource=a; token=01",
		"resource=a;; token=1",
		"RESOURCE=a;\ttoken=99999999999999999999",
		"resource=%E2%80%8B; token=1",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		fence, err := httpfence.Parse(v)
		if err != nil {
			if !errors.Is(err, leasehold.ErrInvalid) {
				t.Fatalf("Parse(%q) error %v does not match ErrInvalid", v, err)
			}
			return
		}
		if err := leasehold.ValidateName("resource name", fence.Resource, leasehold.MaxResourceLen, true); err != nil {
			t.Fatalf("Parse(%q) accepted resource %q: %v", v, fence.Resource, err)
		}
		canon, err := httpfence.Format(fence.Resource, fence.Token)
		if err != nil {
			t.Fatalf("Format(Parse(%q)) = %v", v, err)
		}
		again, err := httpfence.Parse(canon)
		if err != nil || again != fence {
			t.Fatalf("Parse(Format(Parse(%q))) = %+v, %v; want %+v", v, again, err, fence)
		}
		if canon2, _ := httpfence.Format(again.Resource, again.Token); canon2 != canon {
			t.Fatalf("canonical form not stable: %q then %q", canon, canon2)
		}
	})
}

func FuzzFormat(f *testing.F) {
	f.Add("orders/42", uint64(7))
	f.Add("batch; id=7", uint64(0))
	f.Add("café 100%", uint64(math.MaxUint64))
	f.Add("\x00", uint64(1))
	f.Fuzz(func(t *testing.T, resource string, token uint64) {
		v, err := httpfence.Format(resource, token)
		if verr := leasehold.ValidateName("resource name", resource, leasehold.MaxResourceLen, true); verr != nil {
			if err == nil {
				t.Fatalf("Format(%q) accepted an invalid name", resource)
			}
			return
		}
		if err != nil {
			t.Fatalf("Format(%q, %d) = %v", resource, token, err)
		}
		got, err := httpfence.Parse(v)
		if err != nil || got.Resource != resource || got.Token != token {
			t.Fatalf("Parse(%q) = %+v, %v; want %q, %d", v, got, err, resource, token)
		}
	})
}
