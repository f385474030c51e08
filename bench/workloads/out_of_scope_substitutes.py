"""Reviewed substitutes of the Seal-Tools tools the out-of-scope suite removes.

Seal-Tools holds many near-duplicate tools (`getOptimismScore` and `getOptimismLevel`, both
"Retrieve the level of optimism"), so a request whose gold tool is removed is often still
served by one that stays: calling it is right, and a suite that scores it as a wrong call
measures label noise. For every tool the suite's dev and test splits remove (seed 0, 20 each;
dev's next 40 too, for `--num-removed 60`),
a reviewer read the request and the catalog (the 8 leaves nearest the request by the MiniLM
evidence, and a name/description search for the request's key terms) and listed each
remaining tool that does what the request asks, for the request's object or a more general
one that covers it (a general text-sentiment tool serves a lyrics-sentiment request; a tool for
a different quantity does not: a mass-transfer *coefficient* is not a mass-transfer *rate*).
The suite removes these with the gold tool, so the request has no tool left and its siblings,
the near misses, stay.

Reviewed 2026-12-04 (issue 25); dev's next 40 on 2026-12-05, where a reasonable reader could
take a remaining tool for the request, it was listed (a doubt removes the tool: the request
becomes plainly out of scope rather than a label either way). An empty tuple: reviewed,
nothing else serves the request. A removed tool missing here is reported by the suite as
unreviewed (another seed or size).
"""

from __future__ import annotations

SUBSTITUTES: dict[str, tuple[str, ...]] = {
    # -- dev split -----------------------------------------------------------------------
    "Engineering/Chemical_engineering/calculateMassTransferRate": (),
    "Gaming/Game_server_administration/startGameServer": (),
    # "Tell me how to say 'What time is it?' in French": any general translator
    "Foreign_Languages/Spanish/translateSpanish": (
        "Technology/Natural_Language_Processing/translateText",
        "Linguistics/Applied_Linguistics/getLanguageTranslation",
        "Science/Linguistics/translateWord",
    ),
    "Virtual_Reality/Virtual_reality_cybersecurity/checkCybersecurity": (
        "Virtual_Reality/Virtual_reality_cybersecurity/checkVRSecurity",
        "Virtual_Reality/Virtual_reality_cybersecurity/getVRSecurityLevel",
        "Technology/Cybersecurity/checkVulnerability",
    ),
    "Music/Music_cognition/getLyricsSentiment": (
        "Machine_Learning/Sentiment_Analysis/classifySentiment",
        "Data_Science/Text_Mining/getTextSentiment",
        "Big_Data/Natural_language_processing/performSentimentAnalysis",
        "Science/Linguistics/getSentenceSentiment",
        "Technology/Data_Science/analyzeSentiment",
    ),
    "Sports/Soccer/getPlayerInfo": (
        "Sports/Athletics/getAthleteProfile",
        "Sports/Football/getFootballPlayerStats",
        "Sports/Football/getPlayerStats",
    ),
    "Marketing/Marketing_ROI_calculation/calculateROI": (
        "Advertising/Ad_tracking_and_reporting/getAdROI",
        "Finance/Corporate_Finance/calculateReturnOnInvestment",
    ),
    "Marketing/Product_launch/createProduct": (
        "Retail/Store_management/addProduct",
        "Retail/Store_management/addProductToStore",
    ),
    "Transportation/Public_Transportation/getPublicTransportationInfo": (
        "Transportation/Public_Transportation/getPublicTransportSchedule",
    ),
    "Technology/Machine_Learning/featureSelection": (),
    "Psychology/Positive_psychology/getOptimismScore": (
        "Psychology/Positive_psychology/getOptimismLevel",
    ),
    "Technology/Image_Processing/applyOCR": (
        "Data_Science/Computer_Vision/recognizeText",
        "Artificial_Intelligence/Machine_Perception/textRecognition",
    ),
    "Art_and_Design/Photography/getPhotoExif": (
        "Art_and_Design/Photography/getPhotoInfo",
        "Media/Media_and_Education/getMediaMetadata",
    ),
    "Telecommunications/Satellite_Communications/sendSatelliteMessage": (),
    "Art_and_Design/Graphic_Design/createGraphic": (
        "Marketing/Graphic_design/createDesign",
        "Design/Graphic_Design/createLayout",
    ),
    "Architecture/Landscape_architecture/getLandscapeArchitecture": (
        "Architecture/Landscape_architecture/getLandscapeDesign",
        "Architecture/Landscape_architecture/getLandscapeProjects",
    ),
    "Information_Technology/IT_Support/resolveTicket": (),
    "Science/Environmental_Science/getWaterQuality": (
        "Environmental/Environmental_Engineering/getWaterPollutionData",
        "Chemistry/Water_chemistry/getWaterChemistry",
    ),
    "Marketing/International_marketing/getCountryMarketSize": (),
    "Biotechnology/Biocomputing/simulateDNASequence": (
        "Mathematics/Bioinformatics/generateRandomSequence",
    ),
    # -- dev split, the next 40 (reviewed 2026-12-05 for --num-removed 60) -----------------
    "Sports/Basketball/getBasketballScore": (),
    # an SVM trainer trains a classifier (counted: doubt removes)
    "Data_Science/Classification/trainClassifier": (
        "Machine_Learning/Support_Vector_Machines/trainSVMModel",
        "Machine_Learning/Support_Vector_Machines/trainSVM",
    ),
    "Criminal_Justice/Evidence-based_Practices_in_Criminal_Justice/getEBPCJ": (),
    # movement control takes the robot's id and a speed
    "Robotics/Human-robot_interaction/setRobotSpeed": (
        "Robotics/Micro_nano_robotics/controlRobotMovement",
    ),
    "Dance/Dance_and_identity/getDanceIdentity": (),
    "Library_Science/Library_Management/returnBook": (),
    "Web_Development/Front-end_development/convertToRGB": (),
    "Food_and_Beverage/Wine_and_spirits/getWineInfo": (),
    "Electrical_Engineering/Wireless_Communication/getInterferenceLevel": (),
    "Aerospace_Engineering/Radar_systems/calculateDopplerShift": (),
    # the request gives e-mail addresses, a subject and a message
    "Advertising/Direct_marketing/sendDirectMail": (
        "Marketing/Direct_marketing/sendMarketingEmail",
    ),
    "Civil_Engineering/Bridge_Engineering/getBridgeLoadCapacity": (),
    "Linguistics/Psycholinguistics/getWordRecognitionTime": (),
    # SEM data; campaign analytics (counted: doubt removes)
    "Advertising/Search_engine_marketing/getSearchEngineMarketingData": (
        "Digital_Marketing/Search_Engine_Marketing_SEM/getSEMData",
        "Business/Marketing/getCampaignAnalytics",
    ),
    "Physical_Education/Sports_injury_prevention_and_management/getInjuryManagementGuidelines": (),
    "Human_Resources/HR_Analytics/getSalaryBenchmark": (),
    "Philosophy/Philosophy_of_Physics/getPhilosophyOfPhysics": (),
    "Healthcare/Obstetrics_and_Gynecology/getPregnancyWeek": (),
    "Public_Administration/Nonprofit_Management/getNonprofitBudget": (),
    # an interaction recorded as a customer update (counted: doubt removes)
    "Customer_Service/Data_Entry_and_Record-keeping/recordData": (
        "Marketing/CRM_software/updateCustomerInfo",
    ),
    "Chemistry/Water_chemistry/getWaterChemistry": (),
    # pest alerts (counted: doubt removes)
    "Agriculture/Agricultural_technology/monitorPestInfestation": (
        "Agriculture/Precision_agriculture/getPestAlerts",
    ),
    "Architecture/Construction_management/getProjectTimeline": (
        "Construction/Construction_scheduling/getProjectSchedule",
    ),
    "Consulting/Data_Analytics_Consulting/getDataAnalyticsConsulting": (
        "Consulting/Data_Analytics_Consulting/getAnalytics",
    ),
    "Technology/Speech_Recognition/analyzeSpeechEmotion": (
        "Electrical_Engineering/Speech_Processing/identifySpeechEmotion",
    ),
    "Non-profit/Social_Impact_Assessment/assessImpact": (
        "Non-profit/Social_Impact_Assessment/calculateSocialImpact",
        "Non-profit/Social_Impact_Assessment/getSocialImpact",
    ),
    # governance statistics (counted: doubt removes)
    "Political_Science/Global_Governance/getGlobalGovernanceIndex": (
        "Political_Science/Global_Governance/getGlobalGovernanceStatistics",
    ),
    "Gaming/Puzzle_games/getPuzzleGame": (
        "Gaming/Puzzle_games/getPuzzleGameStrategy",
    ),
    "Data_Science/Social_Network_Analysis/getSocialNetworkMetrics": (
        "Data_Analysis/Network_Analysis/getNetworkStats",
    ),
    # the request names no warehouse: any available-space tool answers it
    "Logistics/Warehouse_automation/getAvailableSpace": (
        "Urban_Planning/Urban_Agriculture/getUrbanFarmingSpace",
    ),
    "Marketing/International_marketing/getLocalizationServices": (
        "Publishing/Translation_and_localization/localizeContent",
    ),
    "Web_Development/Front-end_development/countDOMElements": (),
    "Sports_Science/Strength_and_conditioning/trackWorkoutProgression": (),
    # a youth leadership program is a youth program (counted: doubt removes)
    "Social_Services/Youth_Development/createYouthProgram": (
        "Non-profit/Youth_Leadership/createLeadershipProgram",
    ),
    "Technology/Computer-Assisted_Design_CAD/generateCADPreview": (),
    "Automotive/Electric_vehicles/lockEVDoors": (
        "Automotive/Connected_vehicles/lockVehicle",
    ),
    # structure information by aircraft type (counted: doubt removes)
    "Aviation/Aircraft_Structures/getAircraftMaterials": (
        "Aviation/Aircraft_Structures/getAircraftStructures",
    ),
    "Aerospace_Engineering/Flight_control_systems/getFlightControlSystemStatus": (
        "Aerospace/Aircraft_systems/getAircraftSystemsStatus",
        "Aerospace_Engineering/Flight_control_systems/getFlightControlData",
    ),
    "Non-profit/Sustainable_Waste_Management/getRecyclingGuide": (),
    "Management/Risk_Management/createRiskProfile": (),
    # -- test split ----------------------------------------------------------------------
    "Publishing/E-book_publishing/updateEbookPrice": (),
    # "Provide information about Avian Influenza in cats": a zoonotic infectious disease
    "Veterinary_Science/Veterinary_Infectious_Diseases/getInfectiousDiseaseInfo": (
        "Veterinary_Science/Veterinary_Zoonoses/getZoonoses",
        "Public_Health/Veterinary_Public_Health/searchZoonoticDiseases",
        "Healthcare/Infectious_Diseases/getInfectionInfo",
    ),
    "Cloud_Computing/Cloud_Networking/createInternetGateway": (),
    "Psychology/Developmental_psychology/getChildDevelopment": (
        "Public_Health/Child_and_Adolescent_Health/getChildDevelopmentAssessment",
    ),
    # "Provide me with a list of policies": every remaining policy tool is one domain's
    "Data_Analysis/Data_Governance/getPolicyList": (),
    "Non-profit/Youth_Sports/deletePlayer": (),
    "Public_Administration/Organizational_Behavior_in_the_Public_Sector/"
    "getLeadershipEffectiveness": (),
    "Automotive/Powertrain_systems/getEnginePower": (),
    "Religious_Studies/Biblical_Studies/getBiblicalText": (
        "Religious_Studies/Biblical_Studies/getBiblicalPassage",
        "Religious_Studies/Biblical_Studies/getBibleVerse",
    ),
    "Finance/Behavioral_Finance/calculateRiskAppetite": (
        "Finance/Behavioral_Finance/getRiskAppetite",
    ),
    "Physical_Education/Physical_activity_and_mental_health/"
    "getPhysicalActivityMentalHealth": (),
    "Healthcare/Internal_Medicine/getDiagnosis": (),
    # "Find information about the Immigration Act"
    "Political_Science/Public_Law_and_Judicial_Politics/searchLawsByName": (
        "Government/Immigration_policy/getImmigrationPolicy",
    ),
    "Research/Research_Proposal_Writing/createResearchProposal": (
        "Research/Research_Proposal_Writing/createProposal",
    ),
    # "Record the activity of patient ...: the patient has taken 10 steps"
    "Nursing/Nursing_Informatics/recordPatientActivity": (
        "Physical_Education/Health_promotion/trackSteps",
    ),
    "Non-profit/Youth_Leadership/createLeadershipProgram": (),
    "Library_Science/Collection_Development/addCollection": (),
    "Publishing/Copy_editing/getCopyEdits": (
        "Publishing/Copy_editing/getProofreadingSuggestions",
        "Publishing/Copy_editing/performCopyEditing",
        "Publishing/Copy_editing/copyEditing",
        "Journalism/Copyediting/editText",
        "Journalism/Copyediting/proofreadCopy",
    ),
    "Oceanography/Biological_oceanography/getSpeciesDistribution": (
        "Geography/Biogeography/getBiogeographicalDistribution",
    ),
    "Dance/Tap_dance/getTapDanceSteps": (
        "Dance/Tap_dance/learnTapDance",
    ),
}
