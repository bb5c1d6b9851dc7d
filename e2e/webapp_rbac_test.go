//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/yaml"
)

// The objects the operator's role allows it to read and write by name
// (resourceNames): the markers in examples/webapp/certs.go and main.go, the
// operator's flag defaults, and the names config/ gives the webhook
// configurations after its namePrefix.
const (
	certSecretName       = "webapp-webhook-server-cert"
	mutatingConfigName   = "webapp-mutating-webhook-configuration"
	validatingConfigName = "webapp-validating-webhook-configuration"
)

// permission is one resource (or non-resource URL) of one role bound to the
// operator's ServiceAccount, with the verbs that role grants on it.
type permission struct {
	role     string // "ClusterRole <name>", or "Role <namespace>/<name>"
	group    string // API group, "" for core
	resource string // resource[/subresource], or a non-resource URL
	names    string // resourceNames, comma-separated; "" for every object
	verbs    string // sorted, comma-separated
}

func (p permission) String() string {
	res := p.resource
	if p.group != "" {
		res = p.group + "/" + res
	}
	if p.names != "" {
		res += " [" + p.names + "]"
	}
	return fmt.Sprintf("%s: %s %s", p.role, res, p.verbs)
}

// The roles config/ binds to the operator's ServiceAccount, after namePrefix.
const (
	managerClusterRole = "ClusterRole webapp-manager-role"
	managerRole        = "Role " + operatorNamespace + "/webapp-manager-role"
	metricsAuthRole    = "ClusterRole webapp-metrics-auth-role"
)

// operatorPermissions is the least-privilege assessment: every permission
// the operator's ServiceAccount holds (config/rbac: the role generated from
// the +kubebuilder:rbac markers, and the metrics authentication role), each
// with why the operator needs it. TestWebAppSecurity fails when the roles
// bound in the cluster, or rendered from config/default (`make deploy`) or
// config/local (`make demo`, this suite), hold a permission that is not
// here, or lack one that is: a new marker needs a reason, a dropped one
// leaves the table.
//
// Limited by name (resourceNames): the webhook configurations, the
// certificate Secret and the Lease, the only objects the operator writes
// whose names are fixed. Not limited by name, and why:
//   - create: the apiserver authorizes a create (POST) before the new
//     object's name is known, so a rule with resourceNames never matches
//     it. (A server-side apply that creates an object is authorized as
//     create with the name, but client-go's Lease lock, the Rotator and the
//     registry create with POST.)
//   - Deployments, Services, WebApps, events: one per WebApp (or generated
//     names), in every namespace.
//   - list and watch of the route registry's ConfigMaps: the manager's
//     cache lists and watches the ConfigMaps labelled managed-by in
//     webapp-system (controller.CacheOptions), and a list or watch matches
//     resourceNames only with a metadata.name field selector, one name per
//     informer: sixteen shards would take sixteen informers. Writes (patch,
//     delete) are limited by name.
var operatorPermissions = []struct {
	permission
	why string
}{
	// The WebApp controller (internal/controller/webapp.go).
	{permission{role: managerClusterRole, group: "apps.example.com", resource: "webapps", verbs: "get,list,patch,watch"},
		"the reconciled kind, in every namespace: get/list/watch for the manager's cache (For); " +
			"patch adds and removes the cleanup finalizer. No create, update or delete."},
	{permission{role: managerClusterRole, group: "apps.example.com", resource: "webapps/status", verbs: "get,patch"},
		"patch: the reconciler's status writes (merge patch, optimistic lock). get is not used by the operator " +
			"(it reads status from the cached WebApp): kubebuilder's convention, revealing nothing get on webapps does not."},
	{permission{role: managerClusterRole, group: "apps.example.com", resource: "webapps/finalizers", verbs: "update"},
		"the controller references of the Deployment and Service set blockOwnerDeletion, which clusters enforcing " +
			"OwnerReferencesPermissionEnforcement allow only with update on the owner's finalizers."},
	{permission{role: managerClusterRole, group: "apps", resource: "deployments", verbs: "create,get,list,patch,watch"},
		"each WebApp's Deployment, named after it in its namespace: get/list/watch for the manager's cache (Owns, label-selected), " +
			"patch for server-side apply, create for the apply that creates it. Never update or delete (the garbage collector deletes)."},
	{permission{role: managerClusterRole, group: "", resource: "services", verbs: "create,get,list,patch,watch"},
		"each WebApp's Service (as for Deployments, cached by label) and the database Services WebApps wait for " +
			"(spec.database.serviceName, watched metadata-only in every namespace): " +
			"get/list/watch for the caches, patch and create for server-side apply."},
	{permission{role: managerClusterRole, group: "events.k8s.io", resource: "events", verbs: "create,patch"},
		"the events.k8s.io recorder: reconciler events on WebApps in every namespace and the Rotator's CertificatesUpdated " +
			"on its Secret; patch updates an event series. Event names are generated."},
	// The webhook certificate Rotator (examples/webapp/certs.go).
	{permission{role: managerClusterRole, group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", names: mutatingConfigName, verbs: "get,list,update,watch"},
		"the Rotator injects the CA bundle into its own mutating webhook configuration, and no other: list/watch for its informer " +
			"(field selector metadata.name), get and update for the injection. It can still rewrite this one configuration: RBAC cannot limit fields."},
	{permission{role: managerClusterRole, group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", names: validatingConfigName, verbs: "get,list,update,watch"},
		"as for the mutating configuration: its own validating webhook configuration, and no other."},
	{permission{role: managerClusterRole, group: "apiextensions.k8s.io", resource: "customresourcedefinitions", names: webappCRD, verbs: "get,list,update,watch"},
		"the WebApp CRD and no other: the Rotator injects the CA bundle into its conversion webhook (list/watch for its informer, " +
			"field selector metadata.name; get and update for the injection); the storage version migration reads it (get)."},
	{permission{role: managerClusterRole, group: "apiextensions.k8s.io", resource: "customresourcedefinitions/status", names: webappCRD, verbs: "patch"},
		"the storage version migration trims the WebApp CRD's status.storedVersions to [v2] once every WebApp is rewritten; no other CRD."},
	{permission{role: managerRole, group: "", resource: "secrets", names: certSecretName, verbs: "get,list,update,watch"},
		"the Rotator's CA and serving certificate: every replica's informer (list/watch by metadata.name) and get, " +
			"the leader's update on rotation. No other Secret can be read or changed."},
	{permission{role: managerRole, group: "", resource: "secrets", verbs: "create"},
		"the Rotator recreates its Secret when it is missing. Not limited by name (create): it lets the operator add Secrets " +
			"in webapp-system, not read, change or delete any."},
	// The manager (examples/webapp/main.go): leader election, route registry.
	{permission{role: managerRole, group: "coordination.k8s.io", resource: "leases", names: leaseName, verbs: "get,update"},
		"leader election: get and renew (update) the Lease, and release it on shutdown (update)."},
	{permission{role: managerRole, group: "coordination.k8s.io", resource: "leases", verbs: "create"},
		"leader election creates the Lease the first time. Not limited by name (create)."},
	{permission{role: managerRole, group: "", resource: "events", verbs: "create,patch"},
		"client-go's leader elector records a core/v1 Event on the Lease when it is acquired (controller-runtime's " +
			"deprecated recorder); patch counts repeats. Generated names."},
	{permission{role: managerRole, group: "", resource: "configmaps", names: registryShardNames(), verbs: "patch"},
		"the route registry's 16 shards (webapp-registry-00..15): register and deregister merge-patch one WebApp's key."},
	{permission{role: managerRole, group: "", resource: "configmaps", names: legacyRegistryName, verbs: "delete,patch"},
		"the previous versions' single registry (webapp-registry): each WebApp's pass removes its key, and the pass " +
			"that empties it deletes it (with a precondition on its version)."},
	{permission{role: managerRole, group: "", resource: "configmaps", verbs: "create,list,watch"},
		"create: a registry shard when it is missing (not limited by name: create). list/watch: the manager's cache " +
			"of the shards, selected by the managed-by label, in webapp-system only: one informer cannot list sixteen names " +
			"(a list matches resourceNames only with a metadata.name field selector); the namespace holds the operator's " +
			"own objects, and no Secret."},
	// The secure metrics endpoint (config/rbac/metrics_auth_role.yaml).
	{permission{role: metricsAuthRole, group: "authentication.k8s.io", resource: "tokenreviews", verbs: "create"},
		"the metrics endpoint authenticates a scraper's bearer token."},
	{permission{role: metricsAuthRole, group: "authorization.k8s.io", resource: "subjectaccessreviews", verbs: "create"},
		"the metrics endpoint checks that the scraper may GET /metrics."},
}

// rbacObjects are the RBAC objects that may grant the operator permissions.
type rbacObjects struct {
	roles               []rbacv1.Role
	clusterRoles        []rbacv1.ClusterRole
	roleBindings        []rbacv1.RoleBinding
	clusterRoleBindings []rbacv1.ClusterRoleBinding
}

// bindsOperator reports whether a binding's subjects include the operator's
// ServiceAccount or a group it is in (system:serviceaccounts[:<namespace>]).
// system:authenticated is left out: only Kubernetes' own default bindings
// name it.
func bindsOperator(subjects []rbacv1.Subject) bool {
	for _, s := range subjects {
		switch {
		case s.Kind == rbacv1.ServiceAccountKind && s.Namespace == operatorNamespace && s.Name == operatorServiceAccount:
			return true
		case s.Kind == rbacv1.UserKind && s.Name == operatorUser:
			return true
		case s.Kind == rbacv1.GroupKind && (s.Name == "system:serviceaccounts" || s.Name == "system:serviceaccounts:"+operatorNamespace):
			return true
		}
	}
	return false
}

// isBootstrapDefault reports whether a binding is one of Kubernetes' default
// policy (e.g. system:service-account-issuer-discovery for every
// ServiceAccount): the cluster's, not the operator's.
func isBootstrapDefault(labels map[string]string) bool {
	return labels["kubernetes.io/bootstrapping"] == "rbac-defaults"
}

// permissions flattens the rules of every role bound to the operator into
// one permission per role, group, resource and resourceNames, with the union
// of the verbs. A binding whose role is missing is an error.
func (o rbacObjects) permissions() (map[permission]bool, error) {
	verbs := map[permission]map[string]bool{}
	add := func(role string, rules []rbacv1.PolicyRule) {
		for _, r := range rules {
			names := slices.Clone(r.ResourceNames)
			sort.Strings(names)
			var keys []permission
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					keys = append(keys, permission{role: role, group: g, resource: res, names: strings.Join(names, ",")})
				}
			}
			for _, u := range r.NonResourceURLs {
				keys = append(keys, permission{role: role, resource: u})
			}
			for _, k := range keys {
				if verbs[k] == nil {
					verbs[k] = map[string]bool{}
				}
				for _, v := range r.Verbs {
					verbs[k][v] = true
				}
			}
		}
	}
	clusterRole := func(name string) *rbacv1.ClusterRole {
		for i := range o.clusterRoles {
			if o.clusterRoles[i].Name == name {
				return &o.clusterRoles[i]
			}
		}
		return nil
	}
	var errs []error
	for _, b := range o.clusterRoleBindings {
		if !bindsOperator(b.Subjects) || isBootstrapDefault(b.Labels) {
			continue
		}
		cr := clusterRole(b.RoleRef.Name)
		if cr == nil {
			errs = append(errs, fmt.Errorf("ClusterRoleBinding %s: ClusterRole %s not found", b.Name, b.RoleRef.Name))
			continue
		}
		add("ClusterRole "+cr.Name, cr.Rules)
	}
	for _, b := range o.roleBindings {
		if !bindsOperator(b.Subjects) || isBootstrapDefault(b.Labels) {
			continue
		}
		switch b.RoleRef.Kind {
		case "ClusterRole":
			cr := clusterRole(b.RoleRef.Name)
			if cr == nil {
				errs = append(errs, fmt.Errorf("RoleBinding %s/%s: ClusterRole %s not found", b.Namespace, b.Name, b.RoleRef.Name))
				continue
			}
			add(fmt.Sprintf("ClusterRole %s in %s", cr.Name, b.Namespace), cr.Rules)
		default:
			i := slices.IndexFunc(o.roles, func(r rbacv1.Role) bool { return r.Namespace == b.Namespace && r.Name == b.RoleRef.Name })
			if i < 0 {
				errs = append(errs, fmt.Errorf("RoleBinding %s/%s: Role %s not found", b.Namespace, b.Name, b.RoleRef.Name))
				continue
			}
			add("Role "+b.Namespace+"/"+o.roles[i].Name, o.roles[i].Rules)
		}
	}
	out := map[permission]bool{}
	for k, vs := range verbs {
		list := make([]string, 0, len(vs))
		for v := range vs {
			list = append(list, v)
		}
		sort.Strings(list)
		k.verbs = strings.Join(list, ",")
		out[k] = true
	}
	return out, errors.Join(errs...)
}

// livePermissions reads the RBAC objects of the suite cluster.
func livePermissions(ctx context.Context, cfg *envconf.Config) (map[permission]bool, error) {
	r := cfg.Client().Resources()
	var (
		roles rbacv1.RoleList
		crs   rbacv1.ClusterRoleList
		rbs   rbacv1.RoleBindingList
		crbs  rbacv1.ClusterRoleBindingList
	)
	if err := errors.Join(r.List(ctx, &roles), r.List(ctx, &crs), r.List(ctx, &rbs), r.List(ctx, &crbs)); err != nil {
		return nil, err
	}
	return rbacObjects{roles.Items, crs.Items, rbs.Items, crbs.Items}.permissions()
}

// renderedConfig is what `kubectl kustomize` makes of a kustomization: its
// RBAC objects and the names of its webhook configurations.
type renderedConfig struct {
	rbac                 rbacObjects
	mutating, validating []string
}

// renderConfig builds examples/webapp/config/<dir> with the pinned kubectl.
func renderConfig(ctx context.Context, t *testing.T, dir string) renderedConfig {
	t.Helper()
	out := harness.MustKubectl(ctx, t, "kustomize", filepath.Join(harness.opts.RepoRoot, "examples", "webapp", "config", dir))
	var rc renderedConfig
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(out)), 4096)
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("config/%s: %v", dir, err)
		}
		b, err := yaml.Marshal(raw)
		if err != nil {
			t.Fatal(err)
		}
		into := func(obj any) {
			if err := yaml.Unmarshal(b, obj); err != nil {
				t.Fatalf("config/%s: %s: %v", dir, raw["kind"], err)
			}
		}
		switch raw["kind"] {
		case "Role":
			var o rbacv1.Role
			into(&o)
			rc.rbac.roles = append(rc.rbac.roles, o)
		case "ClusterRole":
			var o rbacv1.ClusterRole
			into(&o)
			rc.rbac.clusterRoles = append(rc.rbac.clusterRoles, o)
		case "RoleBinding":
			var o rbacv1.RoleBinding
			into(&o)
			rc.rbac.roleBindings = append(rc.rbac.roleBindings, o)
		case "ClusterRoleBinding":
			var o rbacv1.ClusterRoleBinding
			into(&o)
			rc.rbac.clusterRoleBindings = append(rc.rbac.clusterRoleBindings, o)
		case "MutatingWebhookConfiguration":
			var o admissionregistrationv1.MutatingWebhookConfiguration
			into(&o)
			rc.mutating = append(rc.mutating, o.Name)
		case "ValidatingWebhookConfiguration":
			var o admissionregistrationv1.ValidatingWebhookConfiguration
			into(&o)
			rc.validating = append(rc.validating, o.Name)
		}
	}
	return rc
}

// assessPermissions fails t for every permission in got that
// operatorPermissions does not explain, and every one it lists that got
// lacks.
func assessPermissions(t *testing.T, where string, got map[permission]bool) {
	t.Helper()
	explained := map[permission]bool{}
	for _, a := range operatorPermissions {
		if explained[a.permission] {
			t.Errorf("operatorPermissions lists %s twice", a.permission)
		}
		explained[a.permission] = true
		if !got[a.permission] {
			t.Errorf("%s: the operator lacks %s, which the least-privilege assessment lists: update operatorPermissions", where, a.permission)
		}
	}
	for p := range got {
		if !explained[p] {
			t.Errorf("%s: the operator holds %s, which the least-privilege assessment (operatorPermissions) does not explain: "+
				"remove the marker or rule, or add the permission with why it is needed", where, p)
		}
	}
}

// describePermissions lists operatorPermissions, one per line with its
// reason on the next.
func describePermissions() string {
	lines := make([]string, 0, len(operatorPermissions))
	for _, a := range operatorPermissions {
		lines = append(lines, fmt.Sprintf("%s\n    %s", a.permission, a.why))
	}
	return strings.Join(lines, "\n")
}
