package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
	"github.com/leasehold/leasehold/api/gen/leasehold/v1/leaseholdv1connect"
)

// TestElectionsListPages: Elections/List pages like Leases/List — 250
// elections in pages of 100 are all seen once, by name, and a page token
// or size the server cannot use is refused with a message that says why.
func TestElectionsListPages(t *testing.T) {
	t.Parallel()
	n := startNode(t)
	c := leaseholdv1connect.NewElectionsClient(httpClient(t), n.URL)
	const total = 250
	names := make([]string, 0, total+1)
	for i := range total {
		names = append(names, fmt.Sprintf("pg/%03d", i))
	}
	names = append(names, "other/1") // outside the prefix: never listed under it
	errs := make(chan error, len(names))
	var wg sync.WaitGroup
	slots := make(chan struct{}, 8)
	for _, name := range names {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if _, err := campaign(t, c, &pb.CampaignRequest{Election: name, Ttl: dur(time.Minute)}); err != nil {
				errs <- fmt.Errorf("campaign %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	list := func(req *pb.ElectionsListRequest) (*pb.ElectionsListResponse, error) {
		res, err := c.List(ctxFor(t, callTimeout), connect.NewRequest(req))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	var sizes []int
	names = names[:0]
	token := ""
	for range 10 {
		res, err := list(&pb.ElectionsListRequest{Prefix: "pg/", PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatalf("list after %q: %v", token, err)
		}
		sizes = append(sizes, len(res.Elections))
		for _, e := range res.Elections {
			names = append(names, e.Name)
		}
		if token = res.NextPageToken; token == "" {
			break
		}
	}
	if fmt.Sprint(sizes) != "[100 100 50]" {
		t.Fatalf("page sizes %v, want [100 100 50]", sizes)
	}
	for i, name := range names {
		if want := fmt.Sprintf("pg/%03d", i); name != want {
			t.Fatalf("election %d is %q, want %q: pages skip, repeat or are out of order", i, name, want)
		}
	}

	// The default page is 100; everything fits in the largest.
	if res, err := list(&pb.ElectionsListRequest{}); err != nil || len(res.Elections) != 100 || res.NextPageToken == "" {
		t.Fatalf("default page: %d elections, next %q, err %v; want 100 and a next page", len(res.GetElections()), res.GetNextPageToken(), err)
	}
	if res, err := list(&pb.ElectionsListRequest{PageSize: 1000}); err != nil || len(res.Elections) != total+1 || res.NextPageToken != "" {
		t.Fatalf("page of 1000: %d elections, next %q, err %v; want %d and no next page", len(res.GetElections()), res.GetNextPageToken(), err, total+1)
	}

	_, err := list(&pb.ElectionsListRequest{Prefix: "pg/", PageToken: "other/1"})
	wantCode(t, err, connect.CodeInvalidArgument, "page_token is not one this server issued")
	_, err = list(&pb.ElectionsListRequest{PageToken: "bad\x00token"})
	wantCode(t, err, connect.CodeInvalidArgument, "page_token is not one this server issued")
	_, err = list(&pb.ElectionsListRequest{PageSize: 1001})
	wantCode(t, err, connect.CodeInvalidArgument, "page_size is 1001; it must be between 1 and 1000")
	_, err = list(&pb.ElectionsListRequest{PageSize: -1})
	wantCode(t, err, connect.CodeInvalidArgument, "page_size is -1")
}
