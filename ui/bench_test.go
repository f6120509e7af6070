package ui_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/testcluster"
)

// BenchmarkLeaseRows is one poll of the live leases table (what each open
// dashboard asks every second) with 500 leases held:
//
//	go test -run '^$' -bench LeaseRows -benchtime 200x ./ui
func BenchmarkLeaseRows(b *testing.B) {
	n := testcluster.StartNode(b, "")
	for i := range 500 / 100 {
		var ops []string
		for j := range 100 {
			ops = append(ops, fmt.Sprintf(`{"acquire":{"resources":["jobs/%03d"],"ttl":"600s","owner":"w%d","operation":"bench"}}`, i*100+j, j))
		}
		req, _ := http.NewRequest("POST", n.URL+"/leasehold.v1.Leases/Batch", strings.NewReader(`{"ops":[`+strings.Join(ops, ",")+`]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("batch: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	b.ResetTimer()
	var size int
	for b.Loop() {
		resp, err := hc.Get(n.URL + "/ui/leases/rows")
		if err != nil {
			b.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.Count(string(body), "<tr ") != 500 {
			b.Fatalf("HTTP %d, %d rows", resp.StatusCode, strings.Count(string(body), "<tr "))
		}
		size = len(body)
	}
	b.ReportMetric(float64(size), "bytes/poll")
}
