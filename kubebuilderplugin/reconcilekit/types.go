package main

import (
	"fmt"
	"regexp"
	"strings"
)

// editTypes gives the scaffold's type what the controller uses: spec fields
// for the Deployment (in place of the example field foo), observedGeneration
// and readyReplicas next to the scaffold's conditions, print columns, and
// GetConditions/SetConditions, which make the type a reconciler.Object.
// Each edit must find the scaffold's text exactly once.
func (r *resource) editTypes(src string) (string, error) {
	k := r.Kind
	edits := []struct {
		what string
		re   *regexp.Regexp
		with string
	}{{
		"the example field foo in " + k + "Spec",
		regexp.MustCompile(`(?m)^\t// foo is an example field.*\n(?:\t//.*\n)*\tFoo \*string .*\n`),
		fmt.Sprintf(`	// image is the container image the %[1]s's Deployment runs. It must
	// carry a tag or a digest.
	// +default="nginxinc/nginx-unprivileged:1.29"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`+"`"+`^[^\s@]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}|@sha256:[a-f0-9]{64})$`+"`"+`
	// +optional
	Image string `+"`"+`json:"image,omitempty"`+"`"+`

	// replicas is the number of pods, 1 to 10.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10
	// +default=1
	// +optional
	Replicas *int32 `+"`"+`json:"replicas,omitempty"`+"`"+`
`, k),
	}, {
		"the conditions field of " + k + "Status",
		regexp.MustCompile(`(?m)^\tConditions \[\]metav1\.Condition .*\n`),
		`$0
	// readyReplicas is the number of ready pods of the Deployment.
	// +optional
	ReadyReplicas int32 ` + "`" + `json:"readyReplicas,omitempty"` + "`" + `

	// observedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 ` + "`" + `json:"observedGeneration,omitempty"` + "`" + `
`,
	}, {
		"the status subresource marker of " + k,
		regexp.MustCompile(`(?m)^// \+kubebuilder:subresource:status\n`),
		`$0// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
`,
	}}
	out := src
	for _, e := range edits {
		if n := len(e.re.FindAllStringIndex(out, -1)); n != 1 {
			return "", fmt.Errorf("found %s %d times, want once: not the type go/v4 scaffolds (already edited?)", e.what, n)
		}
		out = e.re.ReplaceAllString(out, escapeExceptZero(e.with))
	}
	return strings.TrimRight(out, "\n") + fmt.Sprintf(`

// Available is the condition the Deployment step owns: True once every
// replica of the current spec is available. Ready (reconcilekit's
// conditions package) follows it; Reconciling and Stalled follow kstatus.
const Available = "Available"

// GetConditions returns the %[1]s's conditions; with SetConditions it makes
// *%[1]s a reconcilekit reconciler.Object.
func (o *%[1]s) GetConditions() []metav1.Condition { return o.Status.Conditions }

// SetConditions replaces the %[1]s's conditions.
func (o *%[1]s) SetConditions(conds []metav1.Condition) { o.Status.Conditions = conds }
`, k), nil
}

// escapeExceptZero escapes every $ of a replacement but a leading $0
// (the match itself).
func escapeExceptZero(with string) string {
	rest, zero := strings.CutPrefix(with, "$0")
	rest = strings.ReplaceAll(rest, "$", "$$")
	if zero {
		return "${0}" + rest
	}
	return rest
}
