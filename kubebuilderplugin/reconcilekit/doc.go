// Command reconcilekit is a kubebuilder v4 external plugin: with
//
//	kubebuilder init --plugins go/v4,reconcilekit/v1-alpha --domain example.com --repo example.com/site-operator
//	kubebuilder create api --group web --version v1 --kind Site --resource --controller
//
// the controller kubebuilder's go/v4 plugin scaffolds becomes a reconcilekit
// reconciler (reconciler.New with a Deployment step that applies and waits
// for its rollout, a cleanup step under a finalizer, kstatus conditions),
// its test checks what a pass does, that a converged pass writes nothing and
// that the controller becomes Ready under a manager with the generated RBAC
// only, and go.mod requires the kit at the version this plugin was built
// from.
//
// kubebuilder finds the plugin at
// $XDG_CONFIG_HOME/kubebuilder/plugins/reconcilekit/v1-alpha/reconcilekit
// (or under EXTERNAL_PLUGINS_PATH) and speaks to it in JSON on stdin and
// stdout: a PluginRequest with the command, its arguments and every file
// of the project (the "universe"), answered by a PluginResponse with the
// files to write. docs/adopting-kubebuilder.md shows the whole path.
package main
