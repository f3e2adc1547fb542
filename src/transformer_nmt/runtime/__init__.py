"""What any process leans on, training or not: safe writes, shared folders, names, configs."""
