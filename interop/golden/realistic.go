package main

// Hand-built objects shaped like the ones a cluster is full of: what controllers and
// kubectl write, with managedFields, ownerReferences, and labels and annotations
// holding characters encoding/json escapes (<, >, &) and non-ASCII text.

import (
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
)

type namedObject struct {
	name string
	obj  runtime.Object
}

var (
	created = metav1.NewTime(time.Date(2024, 9, 12, 8, 30, 15, 0, time.UTC))
	later   = metav1.NewTime(time.Date(2024, 9, 12, 8, 31, 2, 0, time.UTC))
	micro   = metav1.NewMicroTime(time.Date(2024, 9, 12, 8, 31, 2, 123456000, time.UTC))
)

func ptr[T any](v T) *T { return &v }

func q(s string) resource.Quantity { return resource.MustParse(s) }

// meta is the metadata of a realistic object: labels, annotations with characters
// JSON escapes, a managedFields entry with FieldsV1, and an owner when one is given.
func meta(name, namespace, manager string, owner *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:              name,
		Namespace:         namespace,
		UID:               types.UID("5f2b1c9e-3a4d-4e8f-9b1a-" + uidTail(name)),
		Generation:        3,
		CreationTimestamp: created,
		Labels: map[string]string{
			"app.kubernetes.io/name":       name,
			"app.kubernetes.io/managed-by": manager,
			"tier":                         "backend",
		},
		Annotations: map[string]string{
			"description":                   "caf\u00e9 \u2014 \u65e5\u672c\u8a9e <b>bold</b> & more \U0001F680",
			"example.com/expression":        "a < b && c > d",
			"example.com/line-separator":    "one\u2028two",
			"kubectl.kubernetes.io/restart": "2024-09-12T08:30:00Z",
		},
		ManagedFields: []metav1.ManagedFieldsEntry{
			{
				Manager:    manager,
				Operation:  metav1.ManagedFieldsOperationUpdate,
				APIVersion: "v1",
				Time:       ptr(created),
				FieldsType: "FieldsV1",
				FieldsV1:   &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:description":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:tier":{}}},"f:spec":{}}`)},
			},
			{
				Manager:     "kube-controller-manager",
				Operation:   metav1.ManagedFieldsOperationApply,
				APIVersion:  "v1",
				Time:        ptr(later),
				FieldsType:  "FieldsV1",
				FieldsV1:    &metav1.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:conditions":{"k:{\"type\":\"Ready\"}":{".":{},"f:status":{}}}}}`)},
				Subresource: "status",
			},
		},
	}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{*owner}
		m.Finalizers = []string{"example.com/cleanup"}
	}
	return m
}

func uidTail(name string) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 12)
	for i := range b {
		c := byte(i)
		if i < len(name) {
			c = name[i]
		}
		b[i] = hex[int(c)%16]
	}
	return string(b)
}

func owner(apiVersion, kind, name string) *metav1.OwnerReference {
	return &metav1.OwnerReference{
		APIVersion:         apiVersion,
		Kind:               kind,
		Name:               name,
		UID:                types.UID("0a1b2c3d-4e5f-4a6b-8c7d-" + uidTail(name)),
		Controller:         ptr(true),
		BlockOwnerDeletion: ptr(true),
	}
}

func podSpec() corev1.PodSpec {
	container := func(name, image string, port int32) corev1.Container {
		return corev1.Container{
			Name:    name,
			Image:   image,
			Command: []string{"/bin/" + name},
			Args:    []string{"--port=" + itoa(port), "--log-level=info"},
			Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP},
			},
			Env: []corev1.EnvVar{
				{Name: "LOG_FORMAT", Value: "json"},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
				{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password", Optional: ptr(false)}}},
				{Name: "MEM_LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: q("1Mi")}}},
			},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: q("250m"), corev1.ResourceMemory: q("64Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: q("1"), corev1.ResourceMemory: q("512Mi"), corev1.ResourceEphemeralStorage: q("2Gi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/" + name, ReadOnly: true},
				{Name: "token", MountPath: "/var/run/secrets/tokens", ReadOnly: true},
			},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP, HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "liveness"}}}},
				InitialDelaySeconds: 10,
				TimeoutSeconds:      1,
				PeriodSeconds:       10,
				SuccessThreshold:    1,
				FailureThreshold:    3,
			},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http"), Scheme: corev1.URISchemeHTTP}},
				TimeoutSeconds:   1,
				PeriodSeconds:    5,
				SuccessThreshold: 1,
				FailureThreshold: 3,
			},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr(true),
				RunAsUser:                ptr(int64(1000)),
				AllowPrivilegeEscalation: ptr(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
		}
	}
	return corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "settings"},
				Items:                []corev1.KeyToPath{{Key: "app.yaml", Path: "app.yaml", Mode: ptr(int32(0o444))}},
				DefaultMode:          ptr(int32(0o644)),
			}}},
			{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Audience: "vault", ExpirationSeconds: ptr(int64(3607)), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
				DefaultMode: ptr(int32(420)),
			}}},
		},
		Containers:                    []corev1.Container{container("api", "registry.example.com/api:v1.8.2", 8080), container("sidecar", "registry.example.com/proxy@sha256:0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0", 9090)},
		RestartPolicy:                 corev1.RestartPolicyAlways,
		TerminationGracePeriodSeconds: ptr(int64(30)),
		DNSPolicy:                     corev1.DNSClusterFirst,
		NodeSelector:                  map[string]string{"kubernetes.io/os": "linux", "node.kubernetes.io/instance-type": "m5.large"},
		ServiceAccountName:            "api",
		DeprecatedServiceAccount:      "api",
		SecurityContext:               &corev1.PodSecurityContext{FSGroup: ptr(int64(2000)), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		SchedulerName:                 corev1.DefaultSchedulerName,
		Tolerations: []corev1.Toleration{
			{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "api", Effect: corev1.TaintEffectNoSchedule},
		},
		Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight:          100,
			PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "api"}}, TopologyKey: "kubernetes.io/hostname"},
		}}}},
		Priority:           ptr(int32(0)),
		EnableServiceLinks: ptr(true),
		PreemptionPolicy:   ptr(corev1.PreemptLowerPriority),
	}
}

func itoa(i int32) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

func podTemplate(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/name": name}, Annotations: map[string]string{"checksum/config": "3f0a<&>"}},
		Spec:       podSpec(),
	}
}

func pod() *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: meta("api-7c9d8b6f5-x2k4q", "prod", "kubelet", owner("apps/v1", "ReplicaSet", "api-7c9d8b6f5")),
		Spec:       podSpec(),
	}
	p.GenerateName = "api-7c9d8b6f5-"
	p.Spec.NodeName = "ip-127-0-1-23.ec2.internal"
	ready := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: later}
	}
	status := func(name, image string, restarts int32) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name:  name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: later}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "OOMKilled", StartedAt: created, FinishedAt: later, ContainerID: "containerd://0f1e2d",
			}},
			Ready:        true,
			RestartCount: restarts,
			Image:        image,
			ImageID:      image + "@sha256:9a8b7c6d5e4f",
			ContainerID:  "containerd://" + name + "-4f3e2d1c",
			Started:      ptr(true),
		}
	}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			ready(corev1.PodInitialized), ready(corev1.PodReady), ready(corev1.ContainersReady), ready(corev1.PodScheduled),
		},
		HostIP:    "127.0.1.23",
		HostIPs:   []corev1.HostIP{{IP: "127.0.1.23"}},
		PodIP:     "127.244.3.17",
		PodIPs:    []corev1.PodIP{{IP: "127.244.3.17"}, {IP: "fd00:10:244:3::11"}},
		StartTime: ptr(created),
		ContainerStatuses: []corev1.ContainerStatus{
			status("api", "registry.example.com/api:v1.8.2", 1),
			status("sidecar", "registry.example.com/proxy:2.0", 0),
		},
		QOSClass: corev1.PodQOSBurstable,
	}
	return p
}

func labelSelector(name string) *metav1.LabelSelector {
	return &metav1.LabelSelector{
		MatchLabels:      map[string]string{"app.kubernetes.io/name": name},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"backend", "cache"}}},
	}
}

func realisticObjects() map[schema.GroupVersionKind][]namedObject {
	s := newScheme()
	out := map[schema.GroupVersionKind][]namedObject{}
	add := func(name string, obj runtime.Object) {
		gvk := typeOf(s, obj)
		out[gvk] = append(out[gvk], namedObject{name, obj})
	}

	add("pod", pod())
	add("pod-pending", &corev1.Pod{
		ObjectMeta: meta("batch-0", "jobs", "kube-scheduler", nil),
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: q("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu.", LastTransitionTime: later,
		}}, QOSClass: corev1.PodQOSBurstable},
	})

	replicas := ptr(int32(3))
	add("deployment", &appsv1.Deployment{
		ObjectMeta: meta("api", "prod", "kubectl-client-side-apply", nil),
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: labelSelector("api"),
			Template: podTemplate("api"),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr(intstr.FromString("25%")), MaxSurge: ptr(intstr.FromInt32(1)),
			}},
			RevisionHistoryLimit:    ptr(int32(10)),
			ProgressDeadlineSeconds: ptr(int32(600)),
		},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: later, LastTransitionTime: later, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, LastUpdateTime: later, LastTransitionTime: created, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "api-7c9d8b6f5" has successfully progressed.`},
			},
		},
	})
	add("replicaset", &appsv1.ReplicaSet{
		ObjectMeta: meta("api-7c9d8b6f5", "prod", "kube-controller-manager", owner("apps/v1", "Deployment", "api")),
		Spec:       appsv1.ReplicaSetSpec{Replicas: replicas, Selector: labelSelector("api"), Template: podTemplate("api")},
		Status:     appsv1.ReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, ObservedGeneration: 3},
	})
	add("statefulset", &appsv1.StatefulSet{
		ObjectMeta: meta("db", "prod", "helm", nil),
		Spec: appsv1.StatefulSetSpec{
			Replicas:    replicas,
			Selector:    labelSelector("db"),
			Template:    podTemplate("db"),
			ServiceName: "db",
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q("100Gi")}},
					StorageClassName: ptr("gp3"),
					VolumeMode:       ptr(corev1.PersistentVolumeFilesystem),
				},
			}},
			PodManagementPolicy:                  appsv1.ParallelPodManagement,
			UpdateStrategy:                       appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr(int32(0)), MaxUnavailable: ptr(intstr.FromInt32(1))}},
			RevisionHistoryLimit:                 ptr(int32(10)),
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType, WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3, CurrentRevision: "db-5d8f7b9c6", UpdateRevision: "db-5d8f7b9c6", CollisionCount: ptr(int32(0)), AvailableReplicas: 3},
	})
	add("daemonset", &appsv1.DaemonSet{
		ObjectMeta: meta("node-exporter", "monitoring", "helm", nil),
		Spec: appsv1.DaemonSetSpec{
			Selector:       labelSelector("node-exporter"),
			Template:       podTemplate("node-exporter"),
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr(intstr.FromString("10%")), MaxSurge: ptr(intstr.FromInt32(0))}},
		},
		Status: appsv1.DaemonSetStatus{CurrentNumberScheduled: 12, DesiredNumberScheduled: 12, NumberReady: 11, NumberUnavailable: 1, ObservedGeneration: 3, UpdatedNumberScheduled: 12, NumberAvailable: 11},
	})
	add("controllerrevision", &appsv1.ControllerRevision{
		ObjectMeta: meta("db-5d8f7b9c6", "prod", "kube-controller-manager", owner("apps/v1", "StatefulSet", "db")),
		Data:       runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app.kubernetes.io/name":"db"}},"spec":{"containers":[{"image":"postgres:16","name":"db"}]}}}}`)},
		Revision:   7,
	})

	add("job", &batchv1.Job{
		ObjectMeta: meta("backup-28771230", "ops", "kube-controller-manager", owner("batch/v1", "CronJob", "backup")),
		Spec: batchv1.JobSpec{
			Parallelism: ptr(int32(1)), Completions: ptr(int32(1)), BackoffLimit: ptr(int32(6)), ActiveDeadlineSeconds: ptr(int64(3600)),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{"batch.kubernetes.io/controller-uid": "0a1b2c3d"}},
			ManualSelector:       ptr(false),
			Template:             podTemplate("backup"),
			CompletionMode:       ptr(batchv1.NonIndexedCompletion),
			Suspend:              ptr(false),
			PodReplacementPolicy: ptr(batchv1.TerminatingOrFailed),
		},
		Status: batchv1.JobStatus{
			Conditions:     []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: later, LastTransitionTime: later}},
			StartTime:      ptr(created),
			CompletionTime: ptr(later),
			Succeeded:      1,
			Ready:          ptr(int32(0)),
			Terminating:    ptr(int32(0)),
		},
	})
	add("cronjob", &batchv1.CronJob{
		ObjectMeta: meta("backup", "ops", "kubectl", nil),
		Spec: batchv1.CronJobSpec{
			Schedule:                   "30 2 * * *",
			TimeZone:                   ptr("Europe/Berlin"),
			StartingDeadlineSeconds:    ptr(int64(200)),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			Suspend:                    ptr(false),
			JobTemplate:                batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{BackoffLimit: ptr(int32(2)), Template: podTemplate("backup")}},
			SuccessfulJobsHistoryLimit: ptr(int32(3)),
			FailedJobsHistoryLimit:     ptr(int32(1)),
		},
		Status: batchv1.CronJobStatus{Active: []corev1.ObjectReference{{Kind: "Job", Namespace: "ops", Name: "backup-28771230", UID: "0a1b2c3d", APIVersion: "batch/v1", ResourceVersion: "81234"}}, LastScheduleTime: ptr(created), LastSuccessfulTime: ptr(later)},
	})

	add("service", &corev1.Service{
		ObjectMeta: meta("api", "prod", "kubectl", nil),
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{
				{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http")},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090), AppProtocol: ptr("http")},
			},
			Selector:              map[string]string{"app.kubernetes.io/name": "api"},
			ClusterIP:             "127.96.12.34",
			ClusterIPs:            []string{"127.96.12.34", "fd00:10:96::c22"},
			Type:                  corev1.ServiceTypeClusterIP,
			SessionAffinity:       corev1.ServiceAffinityNone,
			IPFamilies:            []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			IPFamilyPolicy:        ptr(corev1.IPFamilyPolicyPreferDualStack),
			InternalTrafficPolicy: ptr(corev1.ServiceInternalTrafficPolicyCluster),
		},
	})
	add("service-loadbalancer", &corev1.Service{
		ObjectMeta: meta("ingress-nginx", "ingress", "helm", nil),
		Spec: corev1.ServiceSpec{
			Ports:                         []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(8443), NodePort: 31443}},
			Selector:                      map[string]string{"app": "ingress-nginx"},
			ClusterIP:                     "127.96.0.200",
			Type:                          corev1.ServiceTypeLoadBalancer,
			ExternalTrafficPolicy:         corev1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort:           32100,
			AllocateLoadBalancerNodePorts: ptr(true),
			SessionAffinity:               corev1.ServiceAffinityClientIP,
			SessionAffinityConfig:         &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(10800))}},
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{Hostname: "a1b2.elb.amazonaws.com", IPMode: ptr(corev1.LoadBalancerIPModeProxy), Ports: []corev1.PortStatus{{Port: 443, Protocol: corev1.ProtocolTCP}}}}}},
	})
	add("endpoints", &corev1.Endpoints{
		ObjectMeta: meta("api", "prod", "kube-controller-manager", nil),
		Subsets: []corev1.EndpointSubset{{
			Addresses:         []corev1.EndpointAddress{{IP: "127.244.3.17", NodeName: ptr("ip-127-0-1-23.ec2.internal"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "prod", Name: "api-7c9d8b6f5-x2k4q", UID: "5f2b1c9e"}}},
			NotReadyAddresses: []corev1.EndpointAddress{{IP: "127.244.1.9", Hostname: "api-1"}},
			Ports:             []corev1.EndpointPort{{Name: "http", Port: 8080, Protocol: corev1.ProtocolTCP}},
		}},
	})
	add("endpointslice", &discoveryv1.EndpointSlice{
		ObjectMeta:  meta("api-8x7kq", "prod", "endpointslice-controller.k8s.io", owner("v1", "Service", "api")),
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"127.244.3.17"},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: "prod", Name: "api-7c9d8b6f5-x2k4q", UID: "5f2b1c9e"},
			NodeName:   ptr("ip-127-0-1-23.ec2.internal"),
			Zone:       ptr("us-east-1a"),
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "us-east-1a"}}},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080)), AppProtocol: ptr("kubernetes.io/h2c")}},
	})

	add("configmap", &corev1.ConfigMap{
		ObjectMeta: meta("settings", "prod", "kubectl", nil),
		Data: map[string]string{
			"app.yaml":    "server:\n  port: 8080\n  greeting: \"Grüß Gott <&>\"\n",
			"empty":       "",
			"unicode.txt": "\u65e5\u672c\u8a9e \U0001F600 \u2029",
		},
		BinaryData: map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe}},
		Immutable:  ptr(false),
	})
	add("secret", &corev1.Secret{
		ObjectMeta: meta("db", "prod", "kubectl", nil),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte("s3cr3t<&>\x00\xff"), "username": []byte("admin")},
	})
	add("secret-tls", &corev1.Secret{
		ObjectMeta: meta("api-tls", "prod", "cert-manager", nil),
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{"tls.crt": []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"), "tls.key": []byte("-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n")},
		Immutable:  ptr(true),
	})
	add("node", &corev1.Node{
		ObjectMeta: meta("ip-127-0-1-23.ec2.internal", "", "kubelet", nil),
		Spec: corev1.NodeSpec{
			PodCIDR:    "127.244.3.0/24",
			PodCIDRs:   []string{"127.244.3.0/24", "fd00:10:244:3::/64"},
			ProviderID: "aws:///us-east-1a/i-0123456789abcdef0",
			Taints:     []corev1.Taint{{Key: "dedicated", Value: "api", Effect: corev1.TaintEffectNoSchedule, TimeAdded: ptr(created)}},
		},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("8023652Ki"), corev1.ResourcePods: q("110"), corev1.ResourceEphemeralStorage: q("81106868Ki"), "hugepages-2Mi": q("0")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: q("1930m"), corev1.ResourceMemory: q("7333476Ki"), corev1.ResourcePods: q("110"), corev1.ResourceEphemeralStorage: q("73675879426"), "hugepages-2Mi": q("0")},
			Phase:       "",
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastHeartbeatTime: later, LastTransitionTime: created, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: later, LastTransitionTime: created, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: "127.0.1.23"},
				{Type: corev1.NodeHostName, Address: "ip-127-0-1-23.ec2.internal"},
				{Type: corev1.NodeInternalDNS, Address: "ip-127-0-1-23.ec2.internal"},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: "ec2a1b2c3d", SystemUUID: "ec2a1b2c-3d4e", BootID: "7f6e5d4c", KernelVersion: "6.1.102-111.182.amzn2023.x86_64",
				OSImage: "Amazon Linux 2023", ContainerRuntimeVersion: "containerd://1.7.20", KubeletVersion: "v1.31.1", KubeProxyVersion: "v1.31.1",
				OperatingSystem: "linux", Architecture: "amd64",
			},
			Images:       []corev1.ContainerImage{{Names: []string{"registry.example.com/api@sha256:9a8b", "registry.example.com/api:v1.8.2"}, SizeBytes: 48123904}},
			VolumesInUse: []corev1.UniqueVolumeName{"kubernetes.io/csi/ebs.csi.aws.com^vol-0a1b"},
		},
	})
	add("namespace", &corev1.Namespace{
		ObjectMeta: meta("prod", "", "kubectl", nil),
		Spec:       corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
	})
	add("serviceaccount", &corev1.ServiceAccount{
		ObjectMeta:                   meta("api", "prod", "kubectl", nil),
		Secrets:                      []corev1.ObjectReference{{Name: "api-token-x7k2"}},
		ImagePullSecrets:             []corev1.LocalObjectReference{{Name: "registry"}},
		AutomountServiceAccountToken: ptr(false),
	})
	add("event", &corev1.Event{
		ObjectMeta:          meta("api-7c9d8b6f5-x2k4q.17f4a3b2c1d0e9f8", "prod", "kubelet", nil),
		InvolvedObject:      corev1.ObjectReference{Kind: "Pod", Namespace: "prod", Name: "api-7c9d8b6f5-x2k4q", UID: "5f2b1c9e", APIVersion: "v1", ResourceVersion: "81234", FieldPath: "spec.containers{api}"},
		Reason:              "BackOff",
		Message:             `Back-off restarting failed container api in pod api-7c9d8b6f5-x2k4q_prod(5f2b1c9e) <"quoted"> & more`,
		Source:              corev1.EventSource{Component: "kubelet", Host: "ip-127-0-1-23.ec2.internal"},
		FirstTimestamp:      created,
		LastTimestamp:       later,
		Count:               42,
		Type:                corev1.EventTypeWarning,
		EventTime:           metav1.MicroTime{},
		ReportingController: "kubelet",
		ReportingInstance:   "ip-127-0-1-23.ec2.internal",
	})
	add("event-series", &corev1.Event{
		ObjectMeta:          meta("api.17f4a3b2c1d0e9f9", "prod", "kube-controller-manager", nil),
		InvolvedObject:      corev1.ObjectReference{Kind: "Deployment", Namespace: "prod", Name: "api", APIVersion: "apps/v1"},
		Reason:              "ScalingReplicaSet",
		Message:             "Scaled up replica set api-7c9d8b6f5 to 3 from 1",
		EventTime:           micro,
		Series:              &corev1.EventSeries{Count: 2, LastObservedTime: micro},
		Action:              "Scale",
		Type:                corev1.EventTypeNormal,
		ReportingController: "deployment-controller",
		ReportingInstance:   "kube-controller-manager-ip-10-0-0-5",
	})
	add("event", &eventsv1.Event{
		ObjectMeta:               meta("api.17f4a3b2c1d0e9fa", "prod", "kube-scheduler", nil),
		EventTime:                micro,
		Series:                   &eventsv1.EventSeries{Count: 5, LastObservedTime: metav1.NewMicroTime(time.Date(2024, 9, 12, 8, 35, 0, 999999000, time.UTC))},
		ReportingController:      "default-scheduler",
		ReportingInstance:        "default-scheduler-ip-10-0-0-5",
		Action:                   "Binding",
		Reason:                   "Scheduled",
		Regarding:                corev1.ObjectReference{Kind: "Pod", Namespace: "prod", Name: "api-7c9d8b6f5-x2k4q", UID: "5f2b1c9e", APIVersion: "v1", ResourceVersion: "81200"},
		Related:                  &corev1.ObjectReference{Kind: "Node", Name: "ip-127-0-1-23.ec2.internal", APIVersion: "v1"},
		Note:                     "Successfully assigned prod/api-7c9d8b6f5-x2k4q to ip-127-0-1-23.ec2.internal",
		Type:                     "Normal",
		DeprecatedFirstTimestamp: created,
		DeprecatedLastTimestamp:  later,
		DeprecatedCount:          1,
	})
	add("lease", &coordinationv1.Lease{
		ObjectMeta: meta("kube-controller-manager", "kube-system", "kube-controller-manager", nil),
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr("ip-10-0-0-5_7a6b5c4d-3e2f-1a0b-9c8d-7e6f5a4b3c2d"),
			LeaseDurationSeconds: ptr(int32(15)),
			AcquireTime:          ptr(micro),
			RenewTime:            ptr(metav1.NewMicroTime(time.Date(2024, 9, 12, 9, 0, 1, 5000, time.UTC))),
			LeaseTransitions:     ptr(int32(4)),
		},
	})
	add("lease-node", &coordinationv1.Lease{
		ObjectMeta: meta("ip-127-0-1-23.ec2.internal", "kube-node-lease", "kubelet", owner("v1", "Node", "ip-127-0-1-23.ec2.internal")),
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr("ip-127-0-1-23.ec2.internal"), LeaseDurationSeconds: ptr(int32(40)), RenewTime: ptr(micro)},
	})

	rules := []rbacv1.PolicyRule{
		{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}},
		{Verbs: []string{"update", "patch"}, APIGroups: []string{"apps"}, Resources: []string{"deployments/scale"}, ResourceNames: []string{"api"}},
	}
	add("role", &rbacv1.Role{ObjectMeta: meta("pod-reader", "prod", "kubectl", nil), Rules: rules})
	add("clusterrole", &rbacv1.ClusterRole{
		ObjectMeta:      meta("monitoring-view", "", "kubectl", nil),
		Rules:           append(rules, rbacv1.PolicyRule{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics", "/healthz/*"}}),
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.example.com/aggregate-to-monitoring": "true"}}}},
	})
	subjects := []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "api", Namespace: "prod"},
		{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "jane@example.com"},
		{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:authenticated"},
	}
	add("rolebinding", &rbacv1.RoleBinding{ObjectMeta: meta("pod-reader", "prod", "kubectl", nil), Subjects: subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"}})
	add("clusterrolebinding", &rbacv1.ClusterRoleBinding{ObjectMeta: meta("monitoring-view", "", "kubectl", nil), Subjects: subjects, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "monitoring-view"}})

	add("persistentvolume", &corev1.PersistentVolume{
		ObjectMeta: meta("pvc-0a1b2c3d", "", "csi-provisioner", nil),
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q("100Gi")},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0a1b2c3d", FSType: "ext4", VolumeAttributes: map[string]string{"storage.kubernetes.io/csiProvisionerIdentity": "1726129815000-8081-ebs.csi.aws.com"}}},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: "prod", Name: "data-db-0", UID: "0a1b2c3d", APIVersion: "v1", ResourceVersion: "81000"},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "gp3",
			VolumeMode:                    ptr(corev1.PersistentVolumeFilesystem),
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.ebs.csi.aws.com/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a"}}},
			}}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound, LastPhaseTransitionTime: ptr(created)},
	})
	add("persistentvolumeclaim", &corev1.PersistentVolumeClaim{
		ObjectMeta: meta("data-db-0", "prod", "kube-controller-manager", nil),
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q("100Gi")}},
			VolumeName:       "pvc-0a1b2c3d",
			StorageClassName: ptr("gp3"),
			VolumeMode:       ptr(corev1.PersistentVolumeFilesystem),
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Capacity: corev1.ResourceList{corev1.ResourceStorage: q("100Gi")}},
	})
	add("storageclass", &storagev1.StorageClass{
		ObjectMeta:           meta("gp3", "", "helm", nil),
		Provisioner:          "ebs.csi.aws.com",
		Parameters:           map[string]string{"type": "gp3", "encrypted": "true", "iops": "3000"},
		ReclaimPolicy:        ptr(corev1.PersistentVolumeReclaimDelete),
		MountOptions:         []string{"noatime"},
		AllowVolumeExpansion: ptr(true),
		VolumeBindingMode:    ptr(storagev1.VolumeBindingWaitForFirstConsumer),
		AllowedTopologies:    []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{{Key: "topology.ebs.csi.aws.com/zone", Values: []string{"us-east-1a", "us-east-1b"}}}}},
	})
	add("csidriver", &storagev1.CSIDriver{
		ObjectMeta: meta("ebs.csi.aws.com", "", "helm", nil),
		Spec: storagev1.CSIDriverSpec{
			AttachRequired: ptr(true), PodInfoOnMount: ptr(false), VolumeLifecycleModes: []storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent},
			StorageCapacity: ptr(false), FSGroupPolicy: ptr(storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy), RequiresRepublish: ptr(false), SELinuxMount: ptr(false),
			TokenRequests: []storagev1.TokenRequest{{Audience: "sts.amazonaws.com", ExpirationSeconds: ptr(int64(3600))}},
		},
	})

	pathType := networkingv1.PathTypePrefix
	add("ingress", &networkingv1.Ingress{
		ObjectMeta: meta("api", "prod", "kubectl", nil),
		Spec: networkingv1.IngressSpec{
			IngressClassName: ptr("nginx"),
			TLS:              []networkingv1.IngressTLS{{Hosts: []string{"api.example.com"}, SecretName: "api-tls"}},
			Rules: []networkingv1.IngressRule{{Host: "api.example.com", IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{
				{Path: "/", PathType: &pathType, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Name: "http"}}}},
				{Path: "/metrics", PathType: &pathType, Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "api", Port: networkingv1.ServiceBackendPort{Number: 9090}}}},
			}}}}},
		},
		Status: networkingv1.IngressStatus{LoadBalancer: networkingv1.IngressLoadBalancerStatus{Ingress: []networkingv1.IngressLoadBalancerIngress{{IP: "203.0.113.10"}}}},
	})
	add("networkpolicy", &networkingv1.NetworkPolicy{
		ObjectMeta: meta("api-allow", "prod", "kubectl", nil),
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "api"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromInt32(8080))}, {Protocol: ptr(corev1.ProtocolTCP), Port: ptr(intstr.FromString("metrics")), EndPort: nil}},
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ingress"}}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "127.0.0.0/8", Except: []string{"127.0.99.0/24"}}},
				},
			}},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr(corev1.ProtocolUDP), Port: ptr(intstr.FromInt32(53)), EndPort: ptr(int32(54))}}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	})
	add("horizontalpodautoscaler", &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: meta("api", "prod", "kubectl", nil),
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "api", APIVersion: "apps/v1"},
			MinReplicas:    ptr(int32(3)),
			MaxReplicas:    30,
			Metrics: []autoscalingv2.MetricSpec{
				{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr(int32(70))}}},
				{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{Metric: autoscalingv2.MetricIdentifier{Name: "requests_per_second", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"verb": "GET"}}}, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: ptr(q("1k"))}}},
			},
			Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{
				StabilizationWindowSeconds: ptr(int32(300)), SelectPolicy: ptr(autoscalingv2.MaxChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 10, PeriodSeconds: 60}},
			}},
		},
		Status: autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: ptr(int64(3)), LastScaleTime: ptr(later), CurrentReplicas: 3, DesiredReplicas: 4,
			CurrentMetrics: []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr(int32(83)), AverageValue: ptr(q("208m"))}}}},
			Conditions:     []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue, LastTransitionTime: created, Reason: "ReadyForNewScale", Message: "recommended size matches current size"}},
		},
	})
	add("poddisruptionbudget", &policyv1.PodDisruptionBudget{
		ObjectMeta: meta("api", "prod", "kubectl", nil),
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromString("50%")), Selector: labelSelector("api"), UnhealthyPodEvictionPolicy: ptr(policyv1.AlwaysAllow)},
		Status: policyv1.PodDisruptionBudgetStatus{
			ObservedGeneration: 3, DisruptedPods: map[string]metav1.Time{"api-7c9d8b6f5-x2k4q": later}, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3,
			Conditions: []metav1.Condition{{Type: "DisruptionAllowed", Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: later, Reason: "SufficientPods", Message: ""}},
		},
	})
	add("priorityclass", &schedulingv1.PriorityClass{
		ObjectMeta:       meta("high-priority", "", "kubectl", nil),
		Value:            1000000,
		GlobalDefault:    false,
		Description:      "For the API tier — not for batch jobs <please>.",
		PreemptionPolicy: ptr(corev1.PreemptLowerPriority),
	})

	webhookClient := admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: "policy", Name: "webhook", Path: ptr("/validate"), Port: ptr(int32(443))},
		CABundle: []byte("-----BEGIN CERTIFICATE-----\nMIIC\x00\xff\n-----END CERTIFICATE-----\n"),
	}
	webhookRules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}, Scope: ptr(admissionregistrationv1.NamespacedScope)},
	}}
	add("validatingwebhookconfiguration", &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: meta("policy", "", "helm", nil),
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.policy.example.com", ClientConfig: webhookClient, Rules: webhookRules,
			FailurePolicy: ptr(admissionregistrationv1.Fail), MatchPolicy: ptr(admissionregistrationv1.Equivalent),
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "policy", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"off"}}}},
			ObjectSelector:    &metav1.LabelSelector{},
			SideEffects:       ptr(admissionregistrationv1.SideEffectClassNone), TimeoutSeconds: ptr(int32(10)),
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			MatchConditions:         []admissionregistrationv1.MatchCondition{{Name: "not-system", Expression: `!request.userInfo.username.startsWith("system:") && object.metadata.name != "<none>"`}},
		}},
	})
	add("mutatingwebhookconfiguration", &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: meta("injector", "", "helm", nil),
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "inject.sidecar.example.com", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr("https://injector.example.com:8443/mutate?x=1&y=<2>")}, Rules: webhookRules,
			FailurePolicy: ptr(admissionregistrationv1.Ignore), MatchPolicy: ptr(admissionregistrationv1.Exact),
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"sidecar-injection": "enabled"}},
			ObjectSelector:    &metav1.LabelSelector{},
			SideEffects:       ptr(admissionregistrationv1.SideEffectClassNoneOnDryRun), TimeoutSeconds: ptr(int32(5)),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	})
	add("flowschema", &flowcontrolv1.FlowSchema{
		ObjectMeta: meta("service-accounts", "", "api-priority-and-fairness-config-producer-v1", nil),
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
			MatchingPrecedence:         9000,
			DistinguisherMethod:        &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{
					{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: "system:serviceaccounts"}},
					{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: "kube-system", Name: "*"}},
				},
				ResourceRules:    []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}, ClusterScope: true, Namespaces: []string{"*"}}},
				NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
			}},
		},
		Status: flowcontrolv1.FlowSchemaStatus{Conditions: []flowcontrolv1.FlowSchemaCondition{{Type: flowcontrolv1.FlowSchemaConditionDangling, Status: flowcontrolv1.ConditionFalse, LastTransitionTime: created, Reason: "Found", Message: `This FlowSchema references the PriorityLevelConfiguration object named "workload-low" and it exists`}}},
	})
	add("prioritylevelconfiguration", &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: meta("workload-low", "", "api-priority-and-fairness-config-producer-v1", nil),
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{
			Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: ptr(int32(100)),
				LimitResponse:            flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeQueue, Queuing: &flowcontrolv1.QueuingConfiguration{Queues: 128, HandSize: 6, QueueLengthLimit: 50}},
				LendablePercent:          ptr(int32(90)),
			},
		},
	})
	add("prioritylevelconfiguration-exempt", &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: meta("exempt", "", "api-priority-and-fairness-config-producer-v1", nil),
		Spec:       flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementExempt, Exempt: &flowcontrolv1.ExemptPriorityLevelConfiguration{NominalConcurrencyShares: ptr(int32(0)), LendablePercent: ptr(int32(0))}},
	})

	add("customresourcedefinition", crd())
	add("apiservice", &apiregistrationv1.APIService{
		ObjectMeta: meta("v1beta1.metrics.k8s.io", "", "helm", nil),
		Spec: apiregistrationv1.APIServiceSpec{
			Service:               &apiregistrationv1.ServiceReference{Namespace: "kube-system", Name: "metrics-server", Port: ptr(int32(443))},
			Group:                 "metrics.k8s.io",
			Version:               "v1beta1",
			InsecureSkipTLSVerify: false,
			CABundle:              []byte("-----BEGIN CERTIFICATE-----\nMIID\n-----END CERTIFICATE-----\n"),
			GroupPriorityMinimum:  100,
			VersionPriority:       100,
		},
		Status: apiregistrationv1.APIServiceStatus{Conditions: []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: apiregistrationv1.ConditionTrue, LastTransitionTime: later, Reason: "Passed", Message: "all checks passed"}}},
	})
	return out
}

func crd() *apiextensionsv1.CustomResourceDefinition {
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	schema := apiextensionsv1.JSONSchemaProps{
		Type:        "object",
		Description: "Widget is the Schema for the widgets API <v1> & friends — ünïcödé",
		Required:    []string{"spec"},
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": str,
			"kind":       str,
			"metadata":   {Type: "object"},
			"spec": {
				Type:     "object",
				Required: []string{"size"},
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"size":     {Type: "integer", Format: "int32", Minimum: ptr(1.0), Maximum: ptr(100.0), Default: &apiextensionsv1.JSON{Raw: []byte(`3`)}},
					"port":     {XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}, Pattern: `^[0-9]+$|^[a-z]+$`},
					"ratio":    {Type: "number", MultipleOf: ptr(0.25), ExclusiveMaximum: true, Maximum: ptr(1e21)},
					"mode":     {Type: "string", Enum: []apiextensionsv1.JSON{{Raw: []byte(`"fast"`)}, {Raw: []byte(`"safe"`)}}, Default: &apiextensionsv1.JSON{Raw: []byte(`"safe"`)}},
					"labels":   {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &str}, XMapType: ptr("granular")},
					"settings": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: false}, Default: &apiextensionsv1.JSON{Raw: []byte(`{"retries":3,"backoff":{"initial":"1s","max":"30s"},"tags":["a","b"],"enabled":true,"extra":null}`)}},
					"template": {Type: "object", XPreserveUnknownFields: ptr(true), XEmbeddedResource: true, Nullable: true},
					"items": {
						Type:         "array",
						XListType:    ptr("map"),
						XListMapKeys: []string{"name"},
						MaxItems:     ptr(int64(16)),
						Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{
							Type:     "object",
							Required: []string{"name"},
							Properties: map[string]apiextensionsv1.JSONSchemaProps{
								"name":  {Type: "string", MinLength: ptr(int64(1)), MaxLength: ptr(int64(63))},
								"value": {Type: "string", Format: "byte"},
							},
						}},
					},
				},
				XValidations: apiextensionsv1.ValidationRules{{Rule: "self.size <= 10 || self.mode == 'safe'", Message: "big widgets must be safe", MessageExpression: `"size " + string(self.size) + " > 10"`, Reason: ptr(apiextensionsv1.FieldValueForbidden), FieldPath: ".size", OptionalOldSelf: ptr(false)}},
			},
			"status": {Type: "object", XPreserveUnknownFields: ptr(true)},
		},
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: meta("widgets.example.com", "", "kubectl", nil),
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", ShortNames: []string{"wd"}, Kind: "Widget", ListKind: "WidgetList", Categories: []string{"all"}},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{
					Name: "v1", Served: true, Storage: true,
					Schema:                   &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &schema},
					Subresources:             &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}, Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.size", StatusReplicasPath: ".status.size", LabelSelectorPath: ptr(".status.selector")}},
					AdditionalPrinterColumns: []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Size", Type: "integer", JSONPath: ".spec.size", Priority: 0}, {Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}},
					SelectableFields:         []apiextensionsv1.SelectableField{{JSONPath: ".spec.mode"}},
				},
				{Name: "v1beta1", Served: true, Storage: false, Deprecated: true, DeprecationWarning: ptr("example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget"), Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}}},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter, Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{Service: &apiextensionsv1.ServiceReference{Namespace: "widgets", Name: "conversion", Path: ptr("/convert"), Port: ptr(int32(443))}, CABundle: []byte{0x30, 0x82, 0x01, 0x0a}},
				ConversionReviewVersions: []string{"v1"},
			}},
			PreserveUnknownFields: false,
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: created, Reason: "NoConflicts", Message: "no conflicts found"},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue, LastTransitionTime: created, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted"},
			},
			AcceptedNames:  apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", ShortNames: []string{"wd"}, Kind: "Widget", ListKind: "WidgetList", Categories: []string{"all"}},
			StoredVersions: []string{"v1"},
		},
	}
}
