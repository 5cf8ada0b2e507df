/* placeholder until the module lands */
#include "dscommon.h"
#include "dsstage.h"
int ds_cmd_stage(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no stage yet");
	return 1;
}
int ds_cmd_env(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no env yet");
	return 1;
}
int ds_cmd_status(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no status yet");
	return 1;
}
int ds_cmd_clean(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ds_error("this build has no clean yet");
	return 1;
}
