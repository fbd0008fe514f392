package app_test

import (
	"testing"

	"github.com/desk-runtime/desk/app"
	"github.com/desk-runtime/desk/app/apptest"
	"github.com/desk-runtime/desk/store/postgres/pgtest"
)

// TestOnPostgres runs the durability and isolation scenarios with the
// Postgres store, so the server behaves the same on either store. It skips
// with a message when DESK_TEST_POSTGRES is unset.
func TestOnPostgres(t *testing.T) {
	apptest.Parallel(t)
	for name, fn := range map[string]func(*testing.T, app.Config){
		"S_J_ArtifactSurvivesRestart":       testS_J_ArtifactSurvivesRestart,
		"S_K_DeleteSessionDeletesArtifacts": testS_K_DeleteSessionDeletesArtifacts,
		"S_L_DeleteSessionKeepsGroups":      testS_L_DeleteSessionKeepsGroups,
		"S_P_StoragePressureKeepsArtifacts": testS_P_StoragePressureKeepsArtifacts,
		"UpdateRevertDelete":                testUpdateRevertDelete,
		"ActorIsolation":                    testActorIsolation,
		"CrashRecovery":                     testCrashRecovery,
		"ClassificationTable":               testClassificationTable,
	} {
		t.Run(name, func(t *testing.T) {
			fn(t, app.Config{Postgres: pgtest.DSN(t)})
		})
	}
}
