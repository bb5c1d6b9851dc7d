package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// TestDashboardFollowsTheWebApps: the dashboard create api writes is the
// WebApp operator's (examples/webapp/config/grafana, whose every query the
// alert e2e runs against a real Prometheus and requires series of) without
// its panels of a leader, a webhook and its certificate, for the
// scaffold's controller: rendered for the WebApp's controller, each panel's
// queries are the WebApp dashboard's panel's, letter for letter.
func TestDashboardFollowsTheWebApps(t *testing.T) {
	raw, err := os.ReadFile("../../examples/webapp/config/grafana/webapp-operator.json")
	if err != nil {
		t.Fatal(err)
	}
	var webapp dashboard
	if err := json.Unmarshal(raw, &webapp); err != nil {
		t.Fatal(err)
	}
	exprs := map[string][]string{}
	for _, p := range webapp.Panels {
		title := strings.ReplaceAll(p.Title, "WebApps", "WebApp objects")
		for _, tg := range p.Targets {
			exprs[title] = append(exprs[title], tg.Expr)
		}
	}
	rendered, err := (&resource{Name: "webapp-controller", Kind: "WebApp"}).render("dashboard.json.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	var ours dashboard
	if err := json.Unmarshal([]byte(rendered), &ours); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	if len(ours.Panels) != len(webapp.Panels)-3 {
		t.Errorf("%d panels, want the WebApp's %d less leader, webhook certificate and webhook requests", len(ours.Panels), len(webapp.Panels))
	}
	for _, p := range ours.Panels {
		want, ok := exprs[p.Title]
		if !ok {
			t.Errorf("panel %q: not in the WebApp's dashboard", p.Title)
			continue
		}
		var got []string
		for _, tg := range p.Targets {
			got = append(got, tg.Expr)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("panel %q queries\n%s\nwant the WebApp's\n%s", p.Title, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
