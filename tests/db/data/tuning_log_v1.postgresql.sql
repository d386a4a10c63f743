CREATE TABLE schema_version (
	id SERIAL NOT NULL, 
	version INTEGER NOT NULL, 
	PRIMARY KEY (id)
);

CREATE TABLE workloads (
	id BIGSERIAL NOT NULL, 
	key TEXT NOT NULL, 
	template VARCHAR(255) NOT NULL, 
	args TEXT NOT NULL, 
	target TEXT NOT NULL, 
	target_kind VARCHAR(64) NOT NULL, 
	target_model VARCHAR(255) NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (key)
);

CREATE INDEX ix_workloads_family ON workloads (template, target_kind);

CREATE TABLE tuning_runs (
	id VARCHAR(64) NOT NULL, 
	tuner VARCHAR(255) NOT NULL, 
	options TEXT NOT NULL, 
	started FLOAT NOT NULL, 
	ended FLOAT, 
	status VARCHAR(64) NOT NULL, 
	PRIMARY KEY (id)
);

CREATE TABLE records (
	id BIGSERIAL NOT NULL, 
	uid VARCHAR(64) NOT NULL, 
	workload_id BIGINT NOT NULL, 
	run_id VARCHAR(64), 
	config TEXT NOT NULL, 
	config_index BIGINT, 
	costs TEXT NOT NULL, 
	mean_cost FLOAT, 
	median_cost FLOAT, 
	gflops FLOAT, 
	error_kind VARCHAR(255), 
	error_msg TEXT NOT NULL, 
	build_time FLOAT, 
	run_time FLOAT, 
	host VARCHAR(255) NOT NULL, 
	device VARCHAR(255) NOT NULL, 
	timestamp FLOAT NOT NULL, 
	PRIMARY KEY (id), 
	UNIQUE (uid), 
	FOREIGN KEY(workload_id) REFERENCES workloads (id) ON DELETE CASCADE, 
	FOREIGN KEY(run_id) REFERENCES tuning_runs (id) ON DELETE SET NULL
);

CREATE INDEX ix_records_best_mean ON records (workload_id, mean_cost);

CREATE INDEX ix_records_run ON records (run_id);

CREATE INDEX ix_records_best_median ON records (workload_id, median_cost);

INSERT INTO schema_version (id, version) VALUES (1, 1);
