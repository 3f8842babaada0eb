package e2b

import (
	"encoding/json"
	"math"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// The JSON of E2B's control plane (spec/openapi.yml of e2b-dev/E2B, as
// e2b@2.50.0 and e2b@2.51.0 send and read it). Field names are E2B's.

// newSandboxJSON is the body of POST /sandboxes (NewSandbox) and POST
// /v2/sandboxes (NewSandboxV2, which has no secure). Fields Warden cannot
// honour are decoded only to be refused by name.
type newSandboxJSON struct {
	TemplateID          string            `json:"templateID"`
	Timeout             *int64            `json:"timeout"`
	Metadata            map[string]string `json:"metadata"`
	EnvVars             map[string]string `json:"envVars"`
	Secure              *bool             `json:"secure"`
	AllowInternetAccess *bool             `json:"allow_internet_access"`
	Network             *networkJSON      `json:"network"`
	AutoPause           *bool             `json:"autoPause"`
	AutoPauseMemory     *bool             `json:"autoPauseMemory"`
	AutoResume          *autoResumeJSON   `json:"autoResume"`
	MCP                 json.RawMessage   `json:"mcp"`
	IAM                 json.RawMessage   `json:"iam"`
	VolumeMounts        []json.RawMessage `json:"volumeMounts"`
}

type autoResumeJSON struct {
	Enabled bool `json:"enabled"`
}

// networkJSON is SandboxNetworkConfig.
type networkJSON struct {
	AllowOut           []string        `json:"allowOut,omitempty"`
	DenyOut            []string        `json:"denyOut,omitempty"`
	AllowPublicTraffic *bool           `json:"allowPublicTraffic,omitempty"`
	MaskRequestHost    *string         `json:"maskRequestHost,omitempty"`
	HTTPSPorts         []int           `json:"httpsPorts,omitempty"`
	Rules              json.RawMessage `json:"rules,omitempty"`
	EgressProxy        json.RawMessage `json:"egressProxy,omitempty"`
}

// timeoutJSON is SandboxTimeoutRequest and ConnectSandbox(V2).
type timeoutJSON struct {
	Timeout *int64 `json:"timeout"`
	Memory  *bool  `json:"memory"`
}

// sandboxJSON is Sandbox: what create and connect answer.
type sandboxJSON struct {
	SandboxID          string  `json:"sandboxID"`
	TemplateID         string  `json:"templateID"`
	Alias              string  `json:"alias,omitempty"`
	ClientID           string  `json:"clientID"`
	EnvdVersion        string  `json:"envdVersion"`
	EnvdAccessToken    string  `json:"envdAccessToken"`
	TrafficAccessToken string  `json:"trafficAccessToken"`
	Domain             *string `json:"domain"`
}

// listedJSON is ListedSandbox; detailJSON (SandboxDetail) adds to it.
type listedJSON struct {
	SandboxID    string            `json:"sandboxID"`
	TemplateID   string            `json:"templateID"`
	Alias        string            `json:"alias,omitempty"`
	ClientID     string            `json:"clientID"`
	CPUCount     int               `json:"cpuCount"`
	MemoryMB     int64             `json:"memoryMB"`
	DiskSizeMB   int64             `json:"diskSizeMB"`
	StartedAt    time.Time         `json:"startedAt"`
	EndAt        time.Time         `json:"endAt"`
	State        string            `json:"state"`
	EnvdVersion  string            `json:"envdVersion"`
	Metadata     map[string]string `json:"metadata"`
	VolumeMounts []struct{}        `json:"volumeMounts"`
}

type detailJSON struct {
	listedJSON
	EnvdAccessToken     string        `json:"envdAccessToken"`
	Domain              *string       `json:"domain"`
	AllowInternetAccess bool          `json:"allowInternetAccess"`
	Network             networkJSON   `json:"network"`
	Lifecycle           lifecycleJSON `json:"lifecycle"`
}

type lifecycleJSON struct {
	AutoResume bool   `json:"autoResume"`
	OnTimeout  string `json:"onTimeout"`
}

// The SandboxStates of E2B: a Warden session is paused when it is paused
// or snapshotted (see asleep), and running in every other state it is
// listed in.
const (
	stateRunning = "running"
	statePaused  = "paused"
)

// e2bState is the SandboxState of a session E2B lists.
func e2bState(info sandbox.Info) string {
	if asleep(info) {
		return statePaused
	}
	return stateRunning
}

const mib = 1 << 20

func toSandboxJSON(sb *Sandbox) sandboxJSON {
	return sandboxJSON{
		SandboxID: sb.ID, TemplateID: sb.Template, Alias: sb.Template, ClientID: clientID,
		EnvdVersion: EnvdVersion, EnvdAccessToken: sb.EnvdToken, TrafficAccessToken: sb.TrafficToken,
	}
}

func toListedJSON(sb *Sandbox, info sandbox.Info) listedJSON {
	md := sb.Metadata
	if md == nil {
		md = map[string]string{}
	}
	return listedJSON{
		SandboxID: sb.ID, TemplateID: sb.Template, Alias: sb.Template, ClientID: clientID,
		CPUCount: int(math.Ceil(info.Limits.CPUs)), MemoryMB: info.Limits.MemoryBytes / mib,
		DiskSizeMB: info.Limits.DiskBytes / mib, StartedAt: info.CreatedAt.UTC(), EndAt: info.ExpiresAt.UTC(),
		State: e2bState(info), EnvdVersion: EnvdVersion, Metadata: md, VolumeMounts: []struct{}{},
	}
}

func toDetailJSON(sb *Sandbox, info sandbox.Info) detailJSON {
	return detailJSON{
		listedJSON:      toListedJSON(sb, info),
		EnvdAccessToken: sb.EnvdToken,
		// Internet access is never open: at most the hosts of allowOut,
		// through Warden's egress proxy.
		AllowInternetAccess: false,
		Network:             networkJSON{AllowOut: info.Network.Allow, DenyOut: info.Network.Deny},
		Lifecycle:           lifecycleJSON{AutoResume: false, OnTimeout: "kill"},
	}
}
