"""The annotation app: task types, the store of tasks and judgements, and how judgements combine."""
