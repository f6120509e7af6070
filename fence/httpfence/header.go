package httpfence

import (
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/api/leasehold"
)

// HeaderName is the request header that carries a fencing token.
const HeaderName = "Leasehold-Fence"

// maxHeaderLen bounds what Parse reads: the longest canonical value (a
// 256-byte name, every byte percent-encoded, and a 20-digit token) is 805
// bytes, and the rest allows for optional whitespace.
const maxHeaderLen = 1024

// Fence is the content of a Leasehold-Fence header.
type Fence struct {
	Resource string
	Token    uint64
}

// Format returns the header value for resource and token, in canonical form:
//
//	resource=<name>; token=<decimal>
//
// with the name percent-encoded as described in the package doc. It fails
// with an error matching leasehold.ErrInvalid if the name breaks
// leasehold.ValidateName.
func Format(resource string, token uint64) (string, error) {
	if err := validateResource(resource); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len("resource=; token=") + len(resource) + 20)
	b.WriteString("resource=")
	for i := 0; i < len(resource); i++ {
		c := resource[i]
		if literal(c) {
			b.WriteByte(c)
		} else {
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
		}
	}
	b.WriteString("; token=")
	b.WriteString(strconv.FormatUint(token, 10))
	return b.String(), nil
}

// Parse reads a header value. It accepts exactly the two parameters
// "resource" and "token", once each, in either order, with names in any
// case and optional spaces or tabs around the ";". The name may use
// lower-case hex in its escapes and may escape bytes that need none; Format
// writes the canonical form back. Errors match leasehold.ErrInvalid.
func Parse(value string) (Fence, error) {
	var f Fence
	if len(value) > maxHeaderLen {
		return f, invalid("%s header is %d bytes; the limit is %d", HeaderName, len(value), maxHeaderLen)
	}
	var haveResource, haveToken bool
	for param := range strings.SplitSeq(value, ";") {
		param = strings.Trim(param, " \t")
		name, val, ok := strings.Cut(param, "=")
		if !ok {
			return f, invalid("%s header: parameter %q is not name=value", HeaderName, param)
		}
		switch {
		case asciiEqualFold(name, "resource"):
			if haveResource {
				return f, invalid("%s header names the resource twice", HeaderName)
			}
			r, err := decodeResource(val)
			if err != nil {
				return f, err
			}
			f.Resource, haveResource = r, true
		case asciiEqualFold(name, "token"):
			if haveToken {
				return f, invalid("%s header gives the token twice", HeaderName)
			}
			t, err := parseToken(val)
			if err != nil {
				return f, err
			}
			f.Token, haveToken = t, true
		default:
			return f, invalid("%s header: unknown parameter %q", HeaderName, name)
		}
	}
	if !haveResource || !haveToken {
		return Fence{}, invalid("%s header needs both resource= and token=", HeaderName)
	}
	return f, nil
}

// literal reports whether Format writes byte c as itself: RFC 3986's
// unreserved characters plus "/", ":" and "@", so that names shaped like
// paths ("reports/nightly") stay readable. Everything else, including the
// header's own delimiters (";", "=", ",", space, quotes) and "%", is escaped.
func literal(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~/:@", c) >= 0
}

func decodeResource(v string) (string, error) {
	var b []byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '%':
			if i+2 >= len(v) {
				return "", invalid("%s header: resource has a truncated %%-escape", HeaderName)
			}
			hi, ok1 := unhex(v[i+1])
			lo, ok2 := unhex(v[i+2])
			if !ok1 || !ok2 {
				return "", invalid("%s header: resource has a bad %%-escape %q", HeaderName, v[i:i+3])
			}
			b = append(b, hi<<4|lo)
			i += 2
		case literal(c):
			b = append(b, c)
		default:
			return "", invalid("%s header: resource has %q, which must be %%-encoded", HeaderName, c)
		}
	}
	r := string(b)
	if err := validateResource(r); err != nil {
		return "", err
	}
	return r, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// parseToken reads a canonical decimal: digits only (no sign, no spaces),
// no leading zeros, at most math.MaxUint64.
func parseToken(v string) (uint64, error) {
	if v == "" || (len(v) > 1 && v[0] == '0') || strings.TrimLeft(v, "0123456789") != "" {
		return 0, invalid("%s header: token %q is not a decimal number", HeaderName, v)
	}
	t, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, invalid("%s header: token %s is out of range", HeaderName, v)
	}
	return t, nil
}

// asciiEqualFold is strings.EqualFold without Unicode folding, which would
// let "to\u212Aen" (Kelvin sign) pass for "token".
func asciiEqualFold(s, lower string) bool {
	if len(s) != len(lower) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func validateResource(r string) error {
	return leasehold.ValidateName("resource name", r, leasehold.MaxResourceLen, true)
}

func invalid(format string, args ...any) error {
	return leasehold.Errorf(leasehold.CodeInvalid, format, args...)
}
