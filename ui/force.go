package ui

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	pb "github.com/leasehold/leasehold/api/gen/leasehold/v1"
)

// forceData is the forced-release form: the holder, its expiry and last
// progress, and the runbook's risk text, all before the button.
type forceData struct {
	ResourceView
	Confirm, Reason string
}

func (d *Dashboard) forceForm(w http.ResponseWriter, r *http.Request, s *session) {
	d.showForce(w, r, s, http.StatusOK, r.URL.Query().Get("resource"), "", "", "")
}

func (d *Dashboard) showForce(w http.ResponseWriter, r *http.Request, s *session, status int, name, confirm, reason, msg string) {
	if name == "" {
		d.fail(w, r, s, http.StatusBadRequest, "Name a resource: /ui/force-release?resource=NAME.")
		return
	}
	data, err := d.resource(r, s, name)
	if err != nil {
		d.failAPI(w, r, s, err)
		return
	}
	data.Risk = d.risk
	d.render(w, status, "force", page{session: s, Title: "Force release " + name, Nav: "leases", Error: msg,
		Data: forceData{ResourceView: data, Confirm: confirm, Reason: reason}})
}

// forceRelease checks the typed name and the reason, then makes the same
// call as `leasehold force-release` with the viewer's token: the API
// decides whether the token may (admin), and records the actor and reason
// in the audit log.
func (d *Dashboard) forceRelease(w http.ResponseWriter, r *http.Request, s *session) {
	name, confirm := r.PostFormValue("resource"), r.PostFormValue("confirm")
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	id, err := strconv.ParseUint(r.PostFormValue("lease_id"), 10, 64)
	switch {
	case name == "":
		d.fail(w, r, s, http.StatusBadRequest, "The form names no resource.")
		return
	case err != nil || id == 0:
		d.showForce(w, r, s, http.StatusBadRequest, name, confirm, reason,
			"The form names no lease: reload the page to see who holds the resource now.")
		return
	case confirm != name:
		d.showForce(w, r, s, http.StatusBadRequest, name, confirm, reason,
			fmt.Sprintf("Nothing was released: type the resource name %q exactly to confirm.", name))
		return
	case reason == "":
		d.showForce(w, r, s, http.StatusBadRequest, name, confirm, reason,
			"Nothing was released: give a reason; it goes into the audit log with your name.")
		return
	}
	rid := make([]byte, 16)
	rand.Read(rid)
	_, err = d.admin.ForceRelease(r.Context(), authed(s, &pb.ForceReleaseRequest{
		Resource: name, LeaseId: id, Reason: reason, RequestId: "ui-" + hex.EncodeToString(rid)}))
	if err != nil {
		status, msg := apiError(err)
		d.showForce(w, r, s, status, name, confirm, reason, "Nothing was released: "+msg)
		return
	}
	d.log.Info("forced release from the dashboard", "resource", name, "lease", id, "actor", s.Name)
	http.Redirect(w, r, "/ui/lease?forced=1&resource="+url.QueryEscape(name), http.StatusSeeOther)
}
