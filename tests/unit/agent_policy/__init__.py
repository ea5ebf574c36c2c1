"""Table-driven tests for the agent's pure policy layer (sluicegate.agent.policy)."""
