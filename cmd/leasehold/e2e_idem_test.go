package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/cmd/leasehold/internal/cliout"
)

// idemPost posts JSON to an Idempotency procedure, as the README's curl
// example does.
func (n *node) idemPost(t *testing.T, procedure, body string) map[string]any {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := hc.Post(n.url+"/leasehold.v1.Idempotency/"+procedure, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: HTTP %d: %s", procedure, resp.StatusCode, b)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: %v: %s", procedure, err, b)
	}
	return out
}

// Begin and Complete over curl-style JSON, then `idem show` and `idem
// list` see the key, its token and result size, in text and JSON.
func TestCLIIdemShowList(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	// fingerprint is bytes: base64 in JSON ("YW1vdW50PTEw" is "amount=10").
	begun := n.idemPost(t, "Begin", `{"key":"pay/1","fingerprint":"YW1vdW50PTEw","attemptTtl":"30s"}`)
	if begun["state"] != "IDEM_STATE_STARTED" || begun["secret"] == "" {
		t.Fatalf("begin: %v", begun)
	}
	n.idemPost(t, "Complete", `{"key":"pay/1","attempt":"`+begun["attempt"].(string)+`","secret":"`+
		begun["secret"].(string)+`","result":"cGFpZA=="}`)
	replay := n.idemPost(t, "Begin", `{"key":"pay/1","fingerprint":"YW1vdW50PTEw"}`)
	if replay["state"] != "IDEM_STATE_COMPLETED" || replay["result"] != "cGFpZA==" {
		t.Fatalf("replay: %v", replay)
	}

	text := n.lhOK("idem", "show", "pay/1").stdout
	for _, want := range []string{"state:      completed", "token:      " + begun["token"].(string), "result:     4 bytes"} {
		if !strings.Contains(text, want) {
			t.Errorf("idem show does not say %q:\n%s", want, text)
		}
	}
	var rec cliout.IdemRecord
	if err := decodeStrict(n.lhOK("idem", "show", "--json", "pay/1").stdout, &rec); err != nil ||
		rec.State != "completed" || rec.ResultSize != 4 {
		t.Fatalf("idem show --json: %v %v", &rec, err)
	}
	var list cliout.IdemRecords
	if err := decodeStrict(n.lhOK("idem", "list", "--prefix", "pay/", "--json").stdout, &list); err != nil ||
		len(list.Records) != 1 || list.Records[0].Key != "pay/1" || len(list.Records[0].Result) != 0 {
		t.Fatalf("idem list --json: %v %v", &list, err)
	}
	if out := n.lhOK("idem", "list", "--prefix", "other/").stdout; strings.Contains(out, "pay/1") {
		t.Fatalf("idem list --prefix other/ shows pay/1:\n%s", out)
	}
	if r := n.lh("idem", "show", "pay/none"); r.code == 0 || !strings.Contains(r.stderr, "not in use") {
		t.Fatalf("idem show of an unused key: exit %d, %q", r.code, r.stderr)
	}
}
