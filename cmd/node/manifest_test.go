package main

// The parts of Kubernetes objects that chart_test.go checks, decoded from `helm
// template` output.
//
// YAML is decoded with go.yaml.in/yaml/v3, the YAML organisation's maintained
// continuation of gopkg.in/yaml.v3 (archived). It was already in this module's graph (a
// dependency of memberlist and prometheus/common, at v3.0.5 in go.sum), so the main
// module gains no new module, only a direct requirement; the chart check stays an
// ordinary test of the package whose flags it checks. The alternatives cost more: a
// nested module would need the flag list exported from a main package, and converting
// helm's YAML to JSON would need a converter that is not here either. Only the fields
// checked are declared; yaml ignores the rest.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"go.yaml.in/yaml/v3"
)

type object struct {
	Kind     string            `yaml:"kind"`
	Metadata meta              `yaml:"metadata"`
	Spec     yaml.Node         `yaml:"spec"` // decoded again by kind
	Data     map[string]string `yaml:"data"`
}

type meta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type labelSelector struct {
	MatchLabels map[string]string `yaml:"matchLabels"`
}

type statefulSetSpec struct {
	ServiceName         string        `yaml:"serviceName"`
	PodManagementPolicy string        `yaml:"podManagementPolicy"`
	Selector            labelSelector `yaml:"selector"`
	Template            struct {
		Metadata meta    `yaml:"metadata"`
		Spec     podSpec `yaml:"spec"`
	} `yaml:"template"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot bool `yaml:"runAsNonRoot"`
	} `yaml:"securityContext"`
	Containers []container `yaml:"containers"`
	Volumes    []volume    `yaml:"volumes"`
}

type container struct {
	Name           string          `yaml:"name"`
	Args           []string        `yaml:"args"`
	Env            []envVar        `yaml:"env"`
	Ports          []containerPort `yaml:"ports"`
	ReadinessProbe *probe          `yaml:"readinessProbe"`
	LivenessProbe  *probe          `yaml:"livenessProbe"`
	Lifecycle      struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	VolumeMounts    []volumeMount `yaml:"volumeMounts"`
	SecurityContext struct {
		ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
}

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		FieldRef *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
		SecretKeyRef *keyRef `yaml:"secretKeyRef"`
	} `yaml:"valueFrom"`
}

type keyRef struct {
	Name string `yaml:"name"`
	Key  string `yaml:"key"`
}

type containerPort struct {
	Name          string `yaml:"name"`
	ContainerPort int    `yaml:"containerPort"`
	Protocol      string `yaml:"protocol"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"` // a name or a number
	} `yaml:"httpGet"`
}

type volumeMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type volume struct {
	Name   string `yaml:"name"`
	Secret *struct {
		SecretName string `yaml:"secretName"`
	} `yaml:"secret"`
}

type serviceSpec struct {
	ClusterIP                string            `yaml:"clusterIP"`
	PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
	Selector                 map[string]string `yaml:"selector"`
	Ports                    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
		Protocol   string `yaml:"protocol"`
	} `yaml:"ports"`
}

type pdbSpec struct {
	MaxUnavailable string        `yaml:"maxUnavailable"`
	Selector       labelSelector `yaml:"selector"`
}

// readManifests decodes every object of a multi-document YAML file.
func readManifests(path string) ([]object, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := yaml.NewDecoder(f)
	var out []object
	for {
		var o object
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if o.Kind != "" {
			out = append(out, o)
		}
	}
}

// kindOf returns the objects of one kind.
func kindOf(objs []object, kind string) []object {
	var out []object
	for _, o := range objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// decodeSpec decodes o's spec into v.
func decodeSpec(o object, v any) error {
	if err := o.Spec.Decode(v); err != nil {
		return fmt.Errorf("%s %s: spec: %w", o.Kind, o.Metadata.Name, err)
	}
	return nil
}
