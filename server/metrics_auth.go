package server

import (
	"fmt"
	"net/http"
	"slices"
)

// requireScraper serves /metrics (outside Connect) only to callers whose
// bearer token is an operator's or an admin's and is not limited to
// prefixes: the series name every tenant's queues and groups.
func requireScraper(a *Authenticator, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.authenticate(r.Header.Get("Authorization"))
		switch {
		case err != nil:
			w.Header().Set("WWW-Authenticate", "Bearer")
			http.Error(w, err.Error()+"\n", http.StatusUnauthorized)
		case p.Role < RoleOperator:
			http.Error(w, fmt.Sprintf("token %q has role %s; %s needs %s or %s\n", p.Name, p.Role, r.URL.Path, RoleOperator, RoleAdmin),
				http.StatusForbidden)
		case len(p.Prefixes) > 0 && !slices.Contains(p.Prefixes, ""):
			http.Error(w, fmt.Sprintf("token %q is limited to the prefixes %q, and %s names every tenant's queues and groups: "+
				"scrape it with an %s token without prefixes\n", p.Name, p.Prefixes, r.URL.Path, RoleOperator), http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
